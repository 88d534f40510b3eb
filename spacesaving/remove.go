package spacesaving

// Remove stops monitoring the keys for which drop returns true and returns
// how many it removed: to erase what a sketch holds about someone (a
// tenant's keys). The bounds of the other keys, the buckets and Total are
// unchanged, so every guarantee still holds for the keys left.
func (s *Sketch) Remove(drop func(key string) bool) int {
	if s.heap == nil {
		return 0
	}
	keep := make([]counter, 0, len(s.heap))
	for _, c := range s.heap {
		if !drop(c.key) {
			keep = append(keep, c)
		}
	}
	n := len(s.heap) - len(keep)
	if n > 0 {
		s.rebuild(keep)
	}
	return n
}
