package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/internal/collector"
)

// secret is a credential flag: --NAME VALUE, $ENV, or --NAME-file PATH (a
// file that holds only the token, so it is not in the process list or the
// shell history). Giving both a value and a file is an error.
type secret struct {
	name  string
	value *string
	file  *string
}

func secretFlag(fs *flag.FlagSet, envs *[]envFlag, name, envName, help string) *secret {
	return secretFlagNote(fs, envs, name, envName, help, "")
}

// tokenFileNote ends the help of serve's token files.
const tokenFileNote = "; read again within a second when it changes: the new token replaces the old at once (no grace period), an empty or unreadable file keeps the old one (logged); warned of at start when others may read it or its group write it (chmod 600)"

// secretFlagNote is secretFlag with fileHelp added to the help of --NAME-file.
func secretFlagNote(fs *flag.FlagSet, envs *[]envFlag, name, envName, help, fileHelp string) *secret {
	s := &secret{name: name}
	s.value = strFlag(fs, envs, name, envName, "", help)
	s.file = strFlag(fs, envs, name+"-file", envName+"_FILE", "", "file holding the "+name+" (instead of --"+name+")"+fileHelp)
	return s
}

// into sets value to the token given as a flag, or file to its file,
// which the collector reads (at start, and again when it changes).
func (s *secret) into(value, file *string) error {
	if *s.file != "" && *s.value != "" {
		return fmt.Errorf("--%s and --%s-file both given: use one", s.name, s.name)
	}
	*value, *file = *s.value, *s.file
	return nil
}

// get returns the token, read from its file when one is given (once:
// for commands that run and exit).
func (s *secret) get() (string, error) {
	if *s.file == "" {
		if *s.value != "" {
			if err := collector.CheckToken(*s.value); err != nil {
				return "", fmt.Errorf("--%s: %w", s.name, err)
			}
		}
		return *s.value, nil
	}
	if *s.value != "" {
		return "", fmt.Errorf("--%s and --%s-file both given: use one", s.name, s.name)
	}
	b, err := os.ReadFile(*s.file)
	if err != nil {
		return "", fmt.Errorf("--%s-file: %w", s.name, err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("--%s-file %s is empty", s.name, *s.file)
	}
	if err := collector.CheckToken(t); err != nil {
		return "", fmt.Errorf("--%s-file %s: %w", s.name, *s.file, err)
	}
	return t, nil
}

// credentials are the serve command's three tokens and its exposure flags.
type credentials struct {
	report, read, admin *secret
	insecure            *bool
	maxRuleTTL          *string
}

func credentialFlags(fs *flag.FlagSet, envs *[]envFlag) (*credentials, error) {
	c := &credentials{
		report: secretFlagNote(fs, envs, "token", "QTOP_TOKEN", "report credential: the bearer token reporting processes send on POST /v1/reports; it can neither read nor change policy", tokenFileNote),
		read:   secretFlagNote(fs, envs, "read-token", "QTOP_READ_TOKEN", "read credential: the bearer token for the live API, cost reports, GET /v1/policy and /metrics (qtop, Prometheus)", tokenFileNote),
		admin:  secretFlagNote(fs, envs, "admin-token", "QTOP_ADMIN_TOKEN", "policy credential: POST /v1/policy and GET /v1/audit (default: made once, kept in --data-dir/admin-token with mode 0600, never logged, and read again when it changes like --admin-token-file)", tokenFileNote),
	}
	var err error
	if c.insecure, err = boolFlag(fs, envs, "insecure", "QTOP_INSECURE", "allow listening on a non-loopback address without TLS (--tls-cert) or without --token and --read-token (anyone could read the traffic, report and read)"); err != nil {
		return nil, err
	}
	c.maxRuleTTL = strFlag(fs, envs, "max-rule-ttl", "QTOP_MAX_RULE_TTL", "24h", "longest a policy rule may last")
	return c, nil
}

// apply sets cfg's tokens, or the files the collector reads them from,
// and its exposure flags.
func (c *credentials) apply(cfg *collector.Config) error {
	for _, t := range []struct {
		s           *secret
		value, file *string
	}{
		{c.report, &cfg.Token, &cfg.TokenFiles.Token},
		{c.read, &cfg.ReadToken, &cfg.TokenFiles.ReadToken},
		{c.admin, &cfg.AdminToken, &cfg.TokenFiles.AdminToken},
	} {
		if err := t.s.into(t.value, t.file); err != nil {
			return err
		}
	}
	cfg.Insecure = *c.insecure
	d, err := time.ParseDuration(*c.maxRuleTTL)
	if err != nil || d <= 0 {
		return fmt.Errorf("--max-rule-ttl %q: want a positive duration such as 24h", *c.maxRuleTTL)
	}
	cfg.MaxRuleTTL = d
	return nil
}
