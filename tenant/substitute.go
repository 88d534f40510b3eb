package tenant

import (
	"crypto/sha256"
	"encoding/hex"
)

// Substitute is the tenant rule of the doors that cannot refuse what
// arrives: OpenTelemetry spans, sampled PostgreSQL sessions, a
// meter.Recorder's records and a report's rows (the rest of the report
// is good). (The agent, which can, refuses a name ValidateTenant refuses:
// 400.) A name ValidateTenant accepts comes back as it is. Any other
// non-empty name (too long, not UTF-8, unprintable, or in parentheses like
// qtop's own rows) comes back as a stand-in of its own, and substituted
// is true: the first bytes of the name made printable ([Clean]), "…" when
// they are not all of it, "#" and 16 hexadecimal digits of the SHA-256 of
// the whole name:
//
//	200 × "a"       aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…#c2a908d98f5df987
//	"line\nbreak"   line\x0abreak#697affca60d5d0dc
//	"(untagged)"    (untagged)#bca5491ed84464fe
//
// So the load of a bad name is never merged with another tenant's (two
// long names that share their first 128 bytes stay apart, and none joins
// the untagged load), it is billed under a name an operator can match to
// its sender, and the same bad name has the same stand-in in every
// process, door and run. A stand-in is itself a valid tenant name; a
// tenant that chose one as its real name would share its row, as any two
// senders of one name do.
//
// A valid name is escaped ([Escape]): a tenant named [Other] comes back as
// its stand-in, so that it never joins the overflow row, with substituted
// false (the name is not bad). An empty name is no tenant (the load is
// untagged): it comes back empty.
func Substitute(s string) (name string, substituted bool) {
	if s == "" || ValidateTenant(s) == nil {
		return Escape(s), false
	}
	return standIn(s), true
}

// SubstituteRoute is Substitute for a route, the rule of the same doors
// (OpenTelemetry spans, a meter.Recorder's records, a report's rows): a
// route ValidateRoute accepts comes back escaped ([EscapeValue]: a route
// named [Other] as its stand-in, apart from the overflow route); any
// other non-empty route (too long, not UTF-8, unprintable) comes back as
// a stand-in of its own formed as a bad tenant's, and substituted is
// true:
//
//	300 × "r"       rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr…#4b7ae0000877ab8f
//	"/r\x00oute"    /r\x00oute#717a48232c1b835d
//
// So the load of a bad route is a row of its own, never summed into the
// overflow route with the routes beyond a tenant's limit, and the same
// bad route has the same stand-in in every process, door and run. An
// empty route is no route: it comes back empty.
func SubstituteRoute(s string) (name string, substituted bool) {
	if s == "" || ValidateRoute(s) == nil {
		return EscapeValue(s), false
	}
	return standIn(s), true
}

// standIn returns the stand-in of s (see Substitute).
func standIn(s string) string {
	prefix, _ := Clean(s, standInPrefix)
	// A longer cut gives more only when the prefix is not all of s (the
	// longest escape, \uNNNN, is 6 bytes).
	whole, _ := Clean(s, standInPrefix+6)
	sum := sha256.Sum256([]byte(s))
	b := make([]byte, 0, len(prefix)+len("…#")+2*standInHash)
	b = append(b, prefix...)
	if whole != prefix {
		b = append(b, "…"...)
	}
	b = append(b, '#')
	b = hex.AppendEncode(b, sum[:standInHash])
	return string(b)
}

// The stand-in of a bad name: its printable prefix, at most standInPrefix
// bytes, and standInHash bytes of its SHA-256 (64 bits: two bad names share
// a stand-in by chance about once in 2³² pairs, and finding a name with a
// given stand-in takes 2⁶⁴ tries).
const (
	standInPrefix = 48
	standInHash   = 8
)
