package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/qtop-dev/qtop/enforce"
)

// plansFile is the --plans file: the plan table, each tenant's plan and
// the plan of tenants not listed.
//
//	{"plans": {"free": {"limit": {"ru_per_second": 100, "burst": 200}, "weight": 1, "concurrency": 4},
//	           "enterprise": {"limit": {"ru_per_second": 10000, "burst": 20000}, "weight": 16, "concurrency": 64}},
//	 "tenants": {"bigcorp": "enterprise"},
//	 "default": "free"}
type plansFile struct {
	Plans   map[string]enforce.Plan `json:"plans"`
	Tenants map[string]string       `json:"tenants"`
	Default string                  `json:"default"`
}

// readPlans reads and checks a --plans file.
func readPlans(path string) (map[string]enforce.Plan, func(string) string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--plans: %w", err)
	}
	var f plansFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("--plans %s: %w", path, err)
	}
	if len(f.Plans) == 0 {
		return nil, nil, fmt.Errorf("--plans %s: no plans", path)
	}
	if f.Default == "" {
		f.Default = enforce.PlanFree
	}
	for _, p := range append([]string{f.Default}, values(f.Tenants)...) {
		if _, ok := f.Plans[p]; !ok {
			return nil, nil, fmt.Errorf("--plans %s: plan %q is not in \"plans\"", path, p)
		}
	}
	planOf := func(tenant string) string {
		if p, ok := f.Tenants[tenant]; ok {
			return p
		}
		return f.Default
	}
	return f.Plans, planOf, nil
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
