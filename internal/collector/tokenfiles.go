package collector

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// TokenFiles name files that each hold one of the collector's tokens
// (white space around it ignored), in place of Config's strings: the
// token is then in neither the process list nor the environment. New
// reads them. The collector reads them again every second (Tick) and a
// token whose file changed replaces the one in force at once; the old one
// is refused from then on, with no grace period, since a token is rotated
// as often because it leaked as on a schedule. A file that is empty,
// unreadable or larger than maxTokenFile keeps the token in force, and is
// logged as an error once. A file that others may read or write, or its
// group write, is logged as a warning (chmod 600 FILE) at start and when
// its mode changes; the collector serves anyway. Group read is not: a
// Kubernetes secret volume with an fsGroup is 0440, and the group is the
// service's own. The generated DataDir/admin-token
// is watched the same way.
//
// To rotate a token, write the new file beside the old and rename it into
// place, so that no half-written token is ever read.
type TokenFiles struct {
	Token, ReadToken, PeerToken, AdminToken string
}

// maxTokenFile bounds a token file.
const maxTokenFile = 64 << 10

// errEmptyToken: a token file holds only white space.
var errEmptyToken = errors.New("is empty")

// read fills c's token strings from the files named, refusing a token
// given both ways.
func (f TokenFiles) read(c *Config) error {
	for _, t := range []struct {
		name, flag, file string
		value            *string
	}{
		{"report", "--token", f.Token, &c.Token},
		{"read", "--read-token", f.ReadToken, &c.ReadToken},
		{"peer", "--peer-token", f.PeerToken, &c.PeerToken},
		{"admin", "--admin-token", f.AdminToken, &c.AdminToken},
	} {
		if t.file == "" {
			continue
		}
		if *t.value != "" {
			return fmt.Errorf("%w: the %s token is given both as %s and as %s-file: use one", ErrConfig, t.name, t.flag, t.flag)
		}
		tok, _, err := readTokenFile(t.file)
		if err != nil {
			return fmt.Errorf("%w: %s-file: %w", ErrConfig, t.flag, err)
		}
		*t.value = tok
	}
	return nil
}

// readTokenFile returns the token path holds and the file's mode.
func readTokenFile(path string) (string, fs.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	switch {
	case err != nil:
		return "", 0, fmt.Errorf("token file %s: %w", path, err)
	case len(b) > maxTokenFile:
		return "", 0, fmt.Errorf("token file %s is larger than %d bytes: it should hold one token", path, maxTokenFile)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", 0, fmt.Errorf("token file %s %w", path, errEmptyToken)
	}
	if err := CheckToken(t); err != nil {
		return "", 0, fmt.Errorf("token file %s: %w", path, err)
	}
	return t, st.Mode(), nil
}

// CheckToken says whether t can be a bearer token: printable ASCII with
// no space. A token file of two lines, say, holds a token no client can
// send in an Authorization header.
func CheckToken(t string) error {
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: the token holds a space, a line break or a byte that is not printable ASCII (at byte %d): one token, on one line", ErrConfig, i)
		}
	}
	return nil
}

// tokenSet is the tokens in force; an empty one is not required (admin
// always is).
type tokenSet struct{ report, read, peer, admin string }

// tokenPart holds the tokens in force, read without a lock on every
// request, and the files they come from.
type tokenPart struct {
	cur     atomic.Pointer[tokenSet]
	log     *slog.Logger
	reloads *prometheus.CounterVec

	mu    sync.Mutex // reload
	files []*tokenFile
}

// tokenFile is one watched file.
type tokenFile struct {
	name   string // of its token: report, read, peer, admin
	path   string
	set    func(*tokenSet, string)
	mode   fs.FileMode // as last seen
	failed string      // the error last logged; "" when the file last read well
}

// The result label of qtop_collector_token_reloads_total.
const (
	reloadChanged = "changed"
	reloadRefused = "refused"
)

// newTokenPart starts from cfg's tokens (the files already read by
// fill) and the admin token, adminPath its generated file or "". It warns
// of a file that others may open or its group write.
func newTokenPart(cfg Config, admin, adminPath string) (*tokenPart, error) {
	c := &tokenPart{log: cfg.Logger,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_token_reloads_total",
			Help: "Token files read again after they changed, by token and result: changed (the new token is in force) or refused (empty or unreadable: the old one stays)."},
			[]string{"token", "result"})}
	if err := cfg.Registerer.Register(c.reloads); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	c.cur.Store(&tokenSet{report: cfg.Token, read: cfg.ReadToken, peer: cfg.PeerToken, admin: admin})
	watch := func(name, path string, set func(*tokenSet, string)) {
		if path == "" {
			return
		}
		f := &tokenFile{name: name, path: path, set: set}
		if st, err := os.Stat(path); err == nil {
			f.mode = st.Mode()
			c.checkMode(f)
		}
		c.files = append(c.files, f)
		for _, r := range []string{reloadChanged, reloadRefused} {
			c.reloads.WithLabelValues(f.label(), r)
		}
	}
	watch("report", cfg.TokenFiles.Token, func(t *tokenSet, v string) { t.report = v })
	watch("read", cfg.TokenFiles.ReadToken, func(t *tokenSet, v string) { t.read = v })
	watch("peer", cfg.TokenFiles.PeerToken, func(t *tokenSet, v string) { t.peer = v })
	watch("admin", cmp.Or(cfg.TokenFiles.AdminToken, adminPath), func(t *tokenSet, v string) { t.admin = v })
	return c, nil
}

// current returns the tokens in force.
func (c *tokenPart) current() *tokenSet { return c.cur.Load() }

// peerToken is what this collector sends to its peers: the peer token,
// else the read token.
func (c *tokenPart) peerToken() string {
	t := c.current()
	return cmp.Or(t.peer, t.read)
}

// reload reads every watched file again; a token that changed replaces
// the one in force, a file that cannot give one keeps it.
func (c *tokenPart) reload() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.files {
		tok, mode, err := readTokenFile(f.path)
		if err != nil {
			if msg := err.Error(); msg != f.failed {
				f.failed = msg
				c.reloads.WithLabelValues(f.label(), reloadRefused).Inc()
				c.log.Error("token file not read again: the token in force stays", "token", f.label(), "file", f.path, "err", err)
			}
			continue
		}
		f.failed = ""
		if mode != f.mode {
			f.mode = mode
			c.checkMode(f)
		}
		old := c.current()
		next := *old
		f.set(&next, tok)
		if next == *old {
			continue
		}
		c.cur.Store(&next)
		c.reloads.WithLabelValues(f.label(), reloadChanged).Inc()
		c.log.Info("token file changed: its new token is in force and the old one refused", "token", f.label(), "file", f.path)
	}
}

// checkMode warns when others may read or write f, or its group write.
func (c *tokenPart) checkMode(f *tokenFile) {
	if runtime.GOOS == "windows" || f.mode.Perm()&0o027 == 0 {
		return
	}
	c.log.Warn("token file is open to others: anyone who can read it has the "+f.label()+" credential",
		"token", f.label(), "file", f.path, "mode", fmt.Sprintf("%#o", f.mode.Perm()), "fix", "chmod 600 "+f.path)
}

// label names f's token in logs and metrics.
func (f *tokenFile) label() string { return f.name }

// adminToken is Config.AdminToken, or the token kept in DataDir, made
// once and never logged; path is the file it is kept in, "" for
// Config.AdminToken.
func adminToken(cfg Config) (token string, path string, err error) {
	if cfg.AdminToken != "" {
		return cfg.AdminToken, "", nil
	}
	p := filepath.Join(cfg.DataDir, adminTokenFile)
	switch t, _, err := readTokenFile(p); {
	case err == nil:
		return t, p, nil
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errEmptyToken):
		// Not replaced: the token in it may be in use elsewhere.
		return "", "", fmt.Errorf("collector: admin token: %w", err)
	}
	t := randomToken()
	if err := writeSecret(p, t+"\n"); err != nil {
		return "", "", fmt.Errorf("collector: admin token: %w", err)
	}
	return t, p, nil
}

// writeSecret writes data to path with mode 0600 through a file renamed
// into place: never half written, and never with the mode of a file that
// was there before.
func writeSecret(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*") // 0600
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(data)
	err = errors.Join(err, tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
