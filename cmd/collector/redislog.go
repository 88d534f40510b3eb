package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// redisLogOnce guards go-redis's logger, which is one per process: the
// first serve sets it.
var redisLogOnce sync.Once

// logRedisTo sends what go-redis logs by itself (a pool that cannot
// dial, every second while Redis is unreachable) to log at debug level,
// instead of unstructured lines on stderr: the collector logs the same
// failures itself, once per change, with what to do.
func logRedisTo(log *slog.Logger) {
	redisLogOnce.Do(func() { redis.SetLogger(redisLog{log}) })
}

type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client", "msg_redis", strings.TrimSpace(fmt.Sprintf(format, v...)))
}
