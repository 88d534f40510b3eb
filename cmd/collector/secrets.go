package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
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
	s := &secret{name: name}
	s.value = strFlag(fs, envs, name, envName, "", help)
	s.file = strFlag(fs, envs, name+"-file", envName+"_FILE", "", "file holding the "+name+" (instead of --"+name+")")
	return s
}

// get returns the token, read from its file when one is given.
func (s *secret) get() (string, error) {
	if *s.file == "" {
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
		report: secretFlag(fs, envs, "token", "QTOP_TOKEN", "report credential: the bearer token reporting processes send on POST /v1/reports; it can neither read nor change policy"),
		read:   secretFlag(fs, envs, "read-token", "QTOP_READ_TOKEN", "read credential: the bearer token for the live API, cost reports, GET /v1/policy and /metrics (qtop, Prometheus)"),
		admin:  secretFlag(fs, envs, "admin-token", "QTOP_ADMIN_TOKEN", "policy credential: POST /v1/policy and GET /v1/audit (default: made once, kept in --data-dir/admin-token, never logged)"),
	}
	var err error
	if c.insecure, err = boolFlag(fs, envs, "insecure", "QTOP_INSECURE", "allow listening on a non-loopback address without TLS (--tls-cert) or without --token and --read-token (anyone could read the traffic, report and read)"); err != nil {
		return nil, err
	}
	c.maxRuleTTL = strFlag(fs, envs, "max-rule-ttl", "QTOP_MAX_RULE_TTL", "24h", "longest a policy rule may last")
	return c, nil
}

// apply reads the tokens into cfg-style values.
func (c *credentials) apply(token, read, admin *string, insecure *bool, ttl *time.Duration) error {
	var err error
	if *token, err = c.report.get(); err != nil {
		return err
	}
	if *read, err = c.read.get(); err != nil {
		return err
	}
	if *admin, err = c.admin.get(); err != nil {
		return err
	}
	*insecure = *c.insecure
	d, err := time.ParseDuration(*c.maxRuleTTL)
	if err != nil || d <= 0 {
		return fmt.Errorf("--max-rule-ttl %q: want a positive duration such as 24h", *c.maxRuleTTL)
	}
	*ttl = d
	return nil
}
