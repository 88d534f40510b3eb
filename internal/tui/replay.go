package tui

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
)

// A recording is JSON lines: a header line, then one line per snapshot
// as the source sent it, in order:
//
//	{"qtop_recording":1,"source":"postgres qtop@127.0.0.1:5432/app","started":"…"}
//	{"snapshot":{…live.Snapshot…}}
//
// A file whose name ends in .gz is gzip-compressed. qtop --record FILE
// writes one; qtop replay FILE plays it back.
const recordingVersion = 1

// ErrRecording: a recording cannot be read (not one, a newer version, a
// line too long, bad JSON).
var ErrRecording = errors.New("tui: bad recording")

type recordingHeader struct {
	Version int       `json:"qtop_recording"`
	Source  string    `json:"source"`
	Started time.Time `json:"started"`
}

type recordingLine struct {
	Snapshot *api.Snapshot `json:"snapshot"`
}

// Recorder is a Source that passes another one through and appends every
// snapshot it hands out to a recording. Close closes both.
type Recorder struct {
	Source
	mu     sync.Mutex
	w      io.Writer
	flush  func() error // pushes a line to the file (gzip's buffer), or nil
	closer []io.Closer
	err    error // the write that failed: recording stopped
	said   bool  // err was returned once
}

var (
	_ Source       = (*Recorder)(nil)
	_ SafeSignaler = (*Recorder)(nil)
	_ Historian    = (*Recorder)(nil)
	_ Explainer    = (*Recorder)(nil)
	_ OnceSource   = (*Recorder)(nil)
)

// ErrExists is returned by NewRecorder for a file that exists already:
// a recording is never overwritten unless asked (qtop --record --force).
var ErrExists = errors.New("tui: the file exists")

// ErrRecordingStopped is returned once, with the snapshot, by the
// Recorder's Next whose snapshot could not be written (a full disk, a
// file system gone): the live view goes on, unrecorded.
var ErrRecordingStopped = errors.New("tui: recording stopped")

// NewRecorder records what src hands out into the file at path (gzip when
// it ends in .gz). The file must not exist (ErrExists) unless overwrite
// is true: a post-mortem's recording is not lost to a second --record.
func NewRecorder(src Source, path string, now time.Time, overwrite bool) (*Recorder, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%w: --record %s is a folder: give a file, e.g. %s", ErrInput, path, filepath.Join(path, "incident.qtop.gz"))
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if overwrite {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%w: --record %s: %w; choose another file, or add --force to overwrite it", ErrInput, path, ErrExists)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: --record %s: %v", ErrInput, path, err)
	}
	r := &Recorder{Source: src, w: f, closer: []io.Closer{f}}
	if strings.HasSuffix(path, ".gz") {
		// Flushed after every line: a qtop killed, or a machine lost,
		// leaves a recording that plays up to its last snapshot.
		z := gzip.NewWriter(f)
		r.w, r.flush, r.closer = z, z.Flush, []io.Closer{z, f}
	}
	if err := r.line(recordingHeader{Version: recordingVersion, Source: src.Describe(), Started: now.UTC()}); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Recorder) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	_, err = r.w.Write(append(b, '\n'))
	if err == nil && r.flush != nil {
		err = r.flush()
	}
	if err != nil {
		r.err = fmt.Errorf("%w: %w", ErrRecordingStopped, err)
		return r.err
	}
	return nil
}

// Next returns the source's next snapshot and records it. The first
// snapshot that cannot be written comes with ErrRecordingStopped (the UI
// says so and goes on); the next ones come without it, unrecorded.
func (r *Recorder) Next(ctx context.Context, q Query) (api.Snapshot, error) {
	s, err := r.Source.Next(ctx, q)
	if err != nil {
		return s, err
	}
	return r.record(s)
}

// Once passes through to a source that waits for its first complete
// snapshot (OnceSource), else takes its next one, and records it: qtop
// --once --record prints and keeps what --once alone would print.
func (r *Recorder) Once(ctx context.Context, q Query) (api.Snapshot, error) {
	o, ok := r.Source.(OnceSource)
	if !ok {
		return r.Next(ctx, q)
	}
	s, err := o.Once(ctx, q)
	if err != nil {
		return s, err
	}
	return r.record(s)
}

// record appends s to the recording; see Next for the error.
func (r *Recorder) record(s api.Snapshot) (api.Snapshot, error) {
	if err := r.line(recordingLine{Snapshot: &s}); err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.said {
			r.said = true
			return s, fmt.Errorf("%w; the live view goes on, unrecorded (free some space, or record again elsewhere: --record FILE)", err)
		}
	}
	return s, nil
}

// Describe says that the session is recorded, or that it stopped.
func (r *Recorder) Describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.Source.Describe() + " · " + strings.TrimPrefix(r.err.Error(), "tui: ")
	}
	return r.Source.Describe() + " · recording"
}

// CancelStatement and TerminateSession pass through to a source that can.
func (r *Recorder) CancelStatement(ctx context.Context, t pgactivity.Target, actor string) error {
	if s, ok := r.Source.(SafeSignaler); ok {
		return s.CancelStatement(ctx, t, actor)
	}
	return ErrUnsupported
}

func (r *Recorder) TerminateSession(ctx context.Context, t pgactivity.Target, actor string) error {
	if s, ok := r.Source.(SafeSignaler); ok {
		return s.TerminateSession(ctx, t, actor)
	}
	return ErrUnsupported
}

// History passes through to a source with a store (Historian): h works
// while recording on a collector.
func (r *Recorder) History(ctx context.Context, tenant string, minutes int) (api.History, error) {
	if h, ok := r.Source.(Historian); ok {
		return h.History(ctx, tenant, minutes)
	}
	return api.History{}, errNoHistory
}

// Explain passes through to a source that plans statements (Explainer):
// e works while recording qtop --postgres.
func (r *Recorder) Explain(ctx context.Context, database, query string) (string, error) {
	if e, ok := r.Source.(Explainer); ok {
		return e.Explain(ctx, database, query)
	}
	return "", fmt.Errorf("%w: e explains a running statement: run qtop --postgres DSN", ErrCannotExplain)
}

// hasHistory reports whether src (or the source a Recorder records) has
// a store's history.
func hasHistory(src Source) bool {
	if r, ok := src.(*Recorder); ok {
		src = r.Source
	}
	_, ok := src.(Historian)
	return ok
}

// Close closes the recording, then the source.
func (r *Recorder) Close() error {
	var errs []error
	for _, c := range r.closer {
		errs = append(errs, c.Close())
	}
	errs = append(errs, r.Source.Close())
	return errors.Join(errs...)
}

// Replay is a Source that plays a recording back at its own pace (or
// faster, WithSpeed): the same views and keys, read only. After the last
// snapshot it keeps showing it.
type Replay struct {
	path  string
	hdr   recordingHeader
	lines *lineReader
	close []io.Closer
	speed float64
	sleep func(ctx context.Context, d time.Duration) error

	mu    sync.Mutex
	n     int
	last  *api.Snapshot
	ended bool
	cut   error // why the file ended mid-line (CutShort), once ended
	done  chan struct{}
	once  sync.Once
	// rmu is held while the file is read: Close takes it to close the
	// file, after done has stopped the read at its next line or chunk.
	rmu sync.Mutex
}

// errCutShort: the file ends inside a line, or its gzip stream before its
// end, as a recording does whose qtop was killed (or whose disk filled)
// while writing it.
var errCutShort = errors.New("the recording stops short of its end")

// errLineTooLong: a line of the recording is longer than any snapshot.
var errLineTooLong = fmt.Errorf("a line longer than %d bytes", api.MaxEventBytes)

// lineChunk is how much of the stream the lineReader reads between two
// checks of its context (its buffer).
const lineChunk = 64 << 10

// lineReader splits a recording into its lines, each ended by a newline
// and at most max bytes long; what follows the last newline is a line cut
// short (errCutShort), never a snapshot. It checks its caller's context
// (and done, closed when the replay is) before each line and each chunk
// of a line it reads, so that a gzip bomb (gigabytes of lines, or one
// endless line, from a small file) stops when its reader is cancelled; a
// line cut off by a cancelled context is kept, and the next call goes on
// with it. A line longer than one chunk
// is kept in chunks while it is read, so a line too long costs max bytes
// of memory, not the doublings of a growing buffer; the error it ends the
// recording with is returned from then on.
type lineReader struct {
	br    *bufio.Reader
	done  <-chan struct{} // closed: ErrClosed
	max   int
	parts [][]byte // the start of the line being read, when longer than a chunk
	n     int      // the bytes in parts
	err   error    // the error that ended the recording, returned from then on
}

func newLineReader(rd io.Reader, max int, done <-chan struct{}) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(rd, lineChunk), max: max, done: done}
}

// next returns the next line without its newline, valid until the next
// call; io.EOF at the end of the stream.
func (l *lineReader) next(ctx context.Context) ([]byte, error) {
	for l.err == nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		select {
		case <-l.done:
			return nil, ErrClosed
		default:
		}
		b, err := l.br.ReadSlice('\n')
		if l.n+len(b) > l.max+1 { // +1: the newline
			l.parts, l.n, l.err = nil, 0, errLineTooLong
			break
		}
		switch {
		case err == nil:
			return l.line(b[:len(b)-1]), nil
		case errors.Is(err, bufio.ErrBufferFull):
			l.parts = append(l.parts, bytes.Clone(b))
			l.n += len(b)
		case errors.Is(err, io.EOF) && l.n+len(b) == 0:
			l.err = io.EOF
		case errors.Is(err, io.EOF):
			l.err = errCutShort
		default:
			l.err = err
		}
	}
	return nil, l.err
}

// line is the line that ends with b: b itself, or the chunks before it
// and b in one slice.
func (l *lineReader) line(b []byte) []byte {
	if len(l.parts) == 0 {
		return b
	}
	out := make([]byte, 0, l.n+len(b))
	for _, p := range l.parts {
		out = append(out, p...)
	}
	l.parts, l.n = nil, 0
	return append(out, b...)
}

// cutShort reports whether err says that the recording stops before its
// end (a gzip stream cut off, a last line without its newline): the
// snapshots before it are whole, and the replay ends there.
func cutShort(err error) bool {
	return errors.Is(err, errCutShort) || errors.Is(err, io.ErrUnexpectedEOF)
}

var _ Source = (*Replay)(nil)

// ReplayOption configures OpenReplay.
type ReplayOption func(*Replay)

// WithSpeed plays the recording speed times faster (1 by default).
func WithSpeed(speed float64) ReplayOption { return func(r *Replay) { r.speed = speed } }

// OpenReplay opens the recording at path. Lines are read one at a time
// (each at most live.MaxEventBytes), so a recording of any length uses the
// memory of one snapshot.
func OpenReplay(path string, opts ...ReplayOption) (*Replay, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	r := &Replay{path: path, speed: 1, close: []io.Closer{f}, done: make(chan struct{}), sleep: sleepCtx}
	for _, o := range opts {
		o(r)
	}
	if r.speed <= 0 || r.speed > 1000 {
		f.Close()
		return nil, fmt.Errorf("%w: replay speed %g: want (0, 1000]", ErrInput, r.speed)
	}
	var rd io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: %s: %v", ErrRecording, path, err)
		}
		rd, r.close = z, []io.Closer{z, f}
	}
	r.lines = newLineReader(rd, api.MaxEventBytes, r.done)
	hdr, err := r.lines.next(context.Background())
	if err != nil {
		r.Close()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s is empty", ErrRecording, path)
		}
		return nil, fmt.Errorf("%w: %s: unreadable (%v)", ErrRecording, path, err)
	}
	if err := json.Unmarshal(hdr, &r.hdr); err != nil || r.hdr.Version == 0 {
		r.Close()
		return nil, fmt.Errorf("%w: %s does not start with a qtop recording header (qtop --record writes one)", ErrRecording, path)
	}
	if r.hdr.Version > recordingVersion {
		r.Close()
		return nil, fmt.Errorf("%w: %s is version %d; this qtop reads version %d", ErrRecording, path, r.hdr.Version, recordingVersion)
	}
	return r, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// read returns the next snapshot of the file, or nil at its end; cut
// says why the file ended early (cutShort), if it did. It stops with
// ctx's error when ctx ends, between lines or chunks of a line.
func (r *Replay) read(ctx context.Context) (s *api.Snapshot, cut, err error) {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	for {
		b, err := r.lines.next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return nil, nil, nil
		case cutShort(err):
			return nil, errCutShort, nil
		case errors.Is(err, ErrClosed), ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return nil, nil, err
		case err != nil:
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrRecording, filepath.Base(r.path), err)
		}
		var l recordingLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, nil, fmt.Errorf("%w: %s, snapshot %d: %v", ErrRecording, filepath.Base(r.path), r.n+1, err)
		}
		if l.Snapshot != nil {
			return l.Snapshot, nil, nil
		}
	}
}

// Next returns the next recorded snapshot, after the time that separated
// it from the previous one (divided by the speed). At the end it blocks
// until ctx ends or the replay is closed.
func (r *Replay) Next(ctx context.Context, _ Query) (api.Snapshot, error) {
	select {
	case <-r.done:
		return api.Snapshot{}, ErrClosed
	default:
	}
	// Only Next (one call at a time) and Last read the file; the lock
	// guards what Describe shows, and is not held while waiting.
	r.mu.Lock()
	ended, prev := r.ended, r.last
	r.mu.Unlock()
	if !ended {
		s, cut, err := r.read(ctx)
		if err != nil {
			return api.Snapshot{}, err
		}
		if s != nil {
			if prev != nil {
				gap := min(max(s.Time.Sub(prev.Time), 0), time.Minute)
				if err := r.sleep(ctx, time.Duration(float64(gap)/r.speed)); err != nil {
					return api.Snapshot{}, err
				}
			}
			r.mu.Lock()
			r.n++
			r.last = s
			r.mu.Unlock()
			return *s, nil
		}
		r.mu.Lock()
		r.ended, r.cut = true, cut
		r.mu.Unlock()
	}
	select {
	case <-ctx.Done():
		return api.Snapshot{}, ctx.Err()
	case <-r.done:
		return api.Snapshot{}, ErrClosed
	}
}

// Last reads the whole recording and returns its last snapshot, for
// qtop replay --once.
func (r *Replay) Last() (api.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		s, cut, err := r.read(context.Background())
		if err != nil {
			return api.Snapshot{}, err
		}
		if s == nil {
			r.ended, r.cut = true, cut
			break
		}
		r.n++
		r.last = s
	}
	if r.last == nil {
		return api.Snapshot{}, fmt.Errorf("%w: %s has no snapshot", ErrRecording, r.path)
	}
	return *r.last, nil
}

// Describe names the recording and how far the replay is.
func (r *Replay) Describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := "replay " + filepath.Base(r.path) + " (" + r.hdr.Source + ") · " + fmt.Sprint(r.n)
	switch {
	case r.cut != nil:
		s += " · ended early: " + r.cut.Error() + " (was its qtop killed?)"
	case r.ended:
		s += " · ended"
	}
	return s
}

// CutShort says, once the replay has ended, why the recording stopped
// before its end (its last snapshot, cut, is left out), or nil.
func (r *Replay) CutShort() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cut
}

// Features: a replay is read only.
func (r *Replay) Features() Features { return Features{} }

// Throttle, Cancel and Terminate are refused: the incident is over.
func (r *Replay) Throttle(context.Context, policy.Rule) error {
	return fmt.Errorf("%w: a replay is read only", ErrUnsupported)
}
func (r *Replay) Cancel(context.Context, int32) error {
	return fmt.Errorf("%w: a replay is read only", ErrUnsupported)
}
func (r *Replay) Terminate(context.Context, int32) error {
	return fmt.Errorf("%w: a replay is read only", ErrUnsupported)
}

// Close closes the file; a blocked Next, or one reading, returns
// ErrClosed.
func (r *Replay) Close() error {
	var errs []error
	r.once.Do(func() {
		close(r.done)
		r.rmu.Lock() // a read stops at its next line or chunk
		defer r.rmu.Unlock()
		for _, c := range r.close {
			errs = append(errs, c.Close())
		}
	})
	return errors.Join(errs...)
}
