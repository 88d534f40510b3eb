package spacesaving

import "testing"

func TestRemove(t *testing.T) {
	s := New(4)
	for i, k := range []string{"a", "b", "c", "d", "e", "f"} {
		s.Add(k, uint64(10*(i+1)))
	}
	before := s.Top(-1)
	if n := s.Remove(func(k string) bool { return k == "e" || k == "zz" }); n != 1 {
		t.Fatalf("removed %d, want 1", n)
	}
	if _, _, ok := s.Estimate("e"); ok {
		t.Fatal("e still monitored")
	}
	var want []Counter
	for _, c := range before {
		if c.Key != "e" {
			want = append(want, c)
		}
	}
	got := s.Top(-1)
	if len(got) != len(want) {
		t.Fatalf("top %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("top %v, want %v", got, want)
		}
		if c, e, ok := s.Estimate(want[i].Key); !ok || c != want[i].Count || e != want[i].Err {
			t.Fatalf("estimate %s = %d±%d %v, want %v", want[i].Key, c, e, ok, want[i])
		}
	}
	if s.Total() != 210 {
		t.Fatalf("total %d, want 210", s.Total())
	}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var r Sketch
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatalf("a sketch after Remove does not decode: %v", err)
	}
	s.Add("g", 5) // still usable
	if n := new(Sketch).Remove(func(string) bool { return true }); n != 0 {
		t.Fatalf("zero sketch removed %d", n)
	}
}
