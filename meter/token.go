package meter

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// tokenOption is where the reporter's bearer token comes from: a fixed
// string (WithToken), a function asked before each attempt
// (WithTokenFunc) or a file read again when it changes (WithTokenFile).
// The last option given wins.
type tokenOption struct {
	value string
	fn    func() string
	file  string
}

// get returns the token for the next attempt.
func (o tokenOption) get() string {
	if o.fn != nil {
		return o.fn()
	}
	return o.value
}

// WithToken makes the Reporter send "Authorization: Bearer token".
func WithToken(token string) ReporterOption {
	return reporterOption(func(c *config) { c.token = tokenOption{value: token} })
}

// WithTokenFunc makes the Reporter ask fn for the token before each
// attempt, so a rotated token is used without a restart (the collector
// takes a new token at once, with no overlap). fn runs on the
// reporter's goroutine and should return quickly; "" sends no token.
func WithTokenFunc(fn func() string) ReporterOption {
	return reporterOption(func(c *config) { c.token = tokenOption{fn: fn} })
}

// WithTokenFile makes the Reporter read the token from path (surrounding
// space trimmed), and again before an attempt when the file has changed
// (another file renamed into place, a Kubernetes Secret's ..data symlink
// swapped, or the file rewritten) or its last read is TokenReread old.
// NewReporter fails if the file cannot be read or is empty; later, such
// a file keeps the last token and is logged (WithLogger).
func WithTokenFile(path string) ReporterOption {
	return reporterOption(func(c *config) { c.token = tokenOption{file: path} })
}

// fileToken is WithTokenFile's token: one stat an attempt, a read only
// when the file's identity, size or mtime differ from the last read, or
// when the last read is TokenReread old. (A file rewritten in place with
// a token of the same length within the file system's clock tick keeps
// its size and mtime: only a read tells.)
type fileToken struct {
	path string
	log  *slog.Logger // nil: nowhere
	// stat is os.Stat, which follows symlinks, so a swapped ..data link
	// shows as another file.
	stat func(string) (os.FileInfo, error)

	mu     sync.Mutex
	token  string
	seen   os.FileInfo // of the last good read
	readAt time.Time   // of the last good read
	said   time.Time   // when a bad file was last logged
	now    func() time.Time
}

// TokenReread is how old the last read of a token file (WithTokenFile)
// may grow before the file is read again though it looks unchanged.
const TokenReread = 10 * time.Second

func newFileToken(path string, log *slog.Logger, now func() time.Time) (*fileToken, error) {
	f := &fileToken{path: path, log: log, stat: os.Stat, now: now}
	fi, err := f.stat(path)
	var tok string
	if err == nil {
		tok, err = ReadTokenFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: token file: %w", ErrInvalid, err)
	}
	f.token, f.seen, f.readAt = tok, fi, now()
	return f, nil
}

// ReadTokenFile returns the token in the file at path, surrounding space
// trimmed, as WithTokenFile reads it: an error if the file cannot be
// read or holds no token. A program that takes a token file can check it
// with this before it starts.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return tok, nil
}

// get returns the token, read again if the file changed. The stat that
// tells a change is the one kept with the read: taken before it, so a
// file replaced during the read differs from it at the next attempt.
func (f *fileToken) get() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := f.stat(f.path)
	if err == nil && sameFile(fi, f.seen) && f.now().Sub(f.readAt) < TokenReread {
		return f.token
	}
	var tok string
	if err == nil {
		tok, err = ReadTokenFile(f.path)
	}
	if err != nil {
		// Keep the last token: a file being replaced may be missing or
		// empty for a moment, and no token at all is never better.
		if f.log != nil && (f.said.IsZero() || f.now().Sub(f.said) >= sendLogEvery) {
			f.said = f.now()
			f.log.Error("meter: the report token file cannot be read; the last token is kept", "err", err.Error())
		}
		return f.token
	}
	if tok != f.token && f.log != nil {
		f.log.Info("meter: report token read again", "file", f.path)
	}
	f.token, f.seen, f.readAt = tok, fi, f.now()
	return f.token
}

// sameFile says whether a and b are the same file, unchanged.
func sameFile(a, b os.FileInfo) bool {
	return b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
