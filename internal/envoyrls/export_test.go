package envoyrls

// Buckets returns the throttle buckets svc tracks.
func Buckets(svc *Service) int { return int(svc.bs.n.Load()) }
