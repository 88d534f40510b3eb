package api

import (
	"encoding/json"
	"time"

	"github.com/qtop-dev/qtop/policy"
)

// PathAutopilot is the autopilot's endpoint on the collector. GET (read
// credential) answers an AutopilotState; POST (admin credential) takes
// one AutopilotCommand: pause, resume, cancel an action, or set the
// autopilot's rules. Every POST is a policy change or an action's end,
// audited with who made it. In a fleet any collector takes each of them:
// pause and resume travel with the shared policy, and a cancel sent to a
// collector that does not hold the autopilot's lock is passed to the one
// that does (AutopilotState.Forwarded).
const PathAutopilot = "/v1/autopilot"

// MaxAutopilotRecent bounds the decisions an AutopilotStatus and an
// AutopilotState carry (the newest).
const MaxAutopilotRecent = 50

// AutopilotStatus is the autopilot as the live snapshot carries it: what
// qtop shows in its headline and Enforcement view.
type AutopilotStatus struct {
	// Rules counts the autopilot's rules; Enforcing those in enforce
	// mode (the others run in shadow).
	Rules     int `json:"rules"`
	Enforcing int `json:"enforcing"`
	// Paused: no new action starts (the policy says so); actions already
	// taken still relax and lift by themselves.
	Paused bool `json:"paused,omitempty"`
	// Acting: this collector runs the rules (it holds the fleet's
	// autopilot lock, or it is alone). Note says why it does not, or
	// what it cannot do.
	Acting bool   `json:"acting"`
	Note   string `json:"note,omitempty"`
	// HeldBy names the collector of the fleet that holds the autopilot's
	// lock when it is another: Active and Recent are then that one's, as
	// it saved them beside the lock at its last change (a cancel sent
	// here is passed to it).
	HeldBy string `json:"held_by,omitempty"`
	// Active are the actions in force (or in shadow), oldest first.
	Active []AutopilotRow `json:"active,omitempty"`
	// Recent are the newest decisions, newest first, each on one line
	// with its evidence (at most MaxAutopilotRecent).
	Recent []string `json:"recent,omitempty"`
}

// AutopilotRow is one action of the autopilot.
type AutopilotRow struct {
	ID     string `json:"id"`
	Rule   string `json:"rule"`
	Tenant string `json:"tenant"`
	// Action is quota, throttle, budget or demote; Limit its limit now
	// (Unit: RU/s, sessions, or × for a price multiplier), Level the
	// relax steps taken.
	Action string  `json:"action"`
	Limit  float64 `json:"limit"`
	Unit   string  `json:"unit"`
	Level  int     `json:"level"`
	// Shadow: decided and counted, never applied.
	Shadow  bool      `json:"shadow,omitempty"`
	Started time.Time `json:"started"`
	Expires time.Time `json:"expires"`
	// Evidence is the figures it was started on, on one line; Now the
	// figures of the last snapshot that followed it ("": none since its
	// start), which its next relax, lift or cancel states.
	Evidence string `json:"evidence"`
	Now      string `json:"now,omitempty"`
}

// AutopilotCommand is the body of a POST to PathAutopilot: exactly one of
// its fields.
type AutopilotCommand struct {
	// Pause stops new actions; Resume lets them start again.
	Pause  bool `json:"pause,omitempty"`
	Resume bool `json:"resume,omitempty"`
	// Cancel ends the action of that id now.
	Cancel string `json:"cancel,omitempty"`
}

// AutopilotState is the answer of GET PathAutopilot (and of a POST): the
// status the live snapshot carries, the rules in the policy, and the
// newest decisions whole, newest first, each a JSON object with its
// evidence as figures (package autopilot's Decision, kept raw here so
// that the contract does not depend on the engine).
type AutopilotState struct {
	Status    AutopilotStatus   `json:"status"`
	Rules     policy.Autopilot  `json:"rules"`
	Decisions []json.RawMessage `json:"decisions"`
	// Forwarded is set on the answer (202 Accepted) to a cancel sent to
	// a collector of a fleet that does not hold the autopilot's lock: it
	// passed the cancel, through Redis, to the collector that does (the
	// one that follows the fleet's actions), and says which, and when
	// that one ends the action (at its next step, within a second).
	Forwarded string `json:"forwarded,omitempty"`
}
