package main

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsCheck(t *testing.T) {
	ok := options{dsn: "postgres://x", rate: 100, workers: 4, duration: time.Minute, analytics: 10 * time.Second, modes: []string{"none", "enforce"}}
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*options){
		"no dsn":    func(o *options) { o.dsn = "" },
		"rate":      func(o *options) { o.rate = 0 },
		"huge rate": func(o *options) { o.rate = 1e6 },
		"workers":   func(o *options) { o.workers = 0 },
		"short":     func(o *options) { o.duration = time.Second },
		"analytics": func(o *options) { o.analytics = 0 },
		"mode":      func(o *options) { o.modes = []string{"fast"} },
	} {
		o := ok
		mod(&o)
		err := o.check()
		if err == nil || !strings.Contains(err.Error(), "--") && name != "no dsn" {
			t.Errorf("%s: %v, want an error naming the flag", name, err)
		}
	}
}

func TestP99(t *testing.T) {
	v := make([]float64, 200)
	for i := range v {
		v[i] = float64(200 - i)
	}
	if got := p99(v); got != 199 {
		t.Fatalf("p99 = %v, want 199", got)
	}
	if p99(nil) != 0 {
		t.Fatal("p99 of nothing")
	}
}
