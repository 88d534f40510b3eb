package collector

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/store"
)

// schemaCheckEvery is how often the collector looks for nodes of a
// ClickHouse cluster that answer without qtop's tables; schemaCheckTimeout
// bounds one look (a hung node must not hold it, nor the collector's
// shutdown, until the driver's read timeout).
const (
	schemaCheckEvery   = 5 * time.Minute
	schemaCheckTimeout = 30 * time.Second
)

// schemaChecker is a store that can name the nodes of its cluster that
// answer without its schema (chstore.Store.NodesWithoutSchema).
type schemaChecker interface {
	NodesWithoutSchema(ctx context.Context) ([]string, error)
}

// nodeCheck finds cluster nodes rebuilt empty. No collector creates the
// tables there by itself (the node's replicas are still registered in
// ZooKeeper); Distributed reads go to the other replica of its shard, and
// a write that reaches it is retried from the spool until the server
// prefers the other one, so nothing else would say that the shard has one
// copy left: it logs each such node once, as an error naming the
// procedure, and exports qtop_collector_store_nodes_without_schema.
type nodeCheck struct {
	st    schemaChecker
	log   *slog.Logger
	gauge prometheus.Gauge
	mu    sync.Mutex
	known []string // the nodes found without the schema last time (under mu)
}

// newNodeCheck returns the check of next (the store behind the spool), or
// nil when the store has no cluster to check.
func newNodeCheck(cfg Config, next store.Store) (*nodeCheck, error) {
	sc, ok := next.(schemaChecker)
	if !ok {
		return nil, nil
	}
	n := &nodeCheck{st: sc, log: cfg.Logger, gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "qtop_collector_store_nodes_without_schema",
		Help: "Nodes of the ClickHouse cluster that answer but have none of qtop's tables (a node rebuilt empty: " +
			"restore them from a replica of its shard, docs/cluster.md). Checked at start and every 5 minutes.",
	})}
	if err := cfg.Registerer.Register(n.gauge); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	return n, nil
}

// once checks the nodes now. A store that does not answer leaves the
// gauge as it was: the spool's metrics say so already.
func (n *nodeCheck) once(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, schemaCheckTimeout)
	defer cancel()
	missing, err := n.st.NodesWithoutSchema(ctx)
	if err != nil {
		n.log.Debug("store: nodes not checked for qtop's tables", "err", err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gauge.Set(float64(len(missing)))
	for _, addr := range missing {
		if !slices.Contains(n.known, addr) {
			n.log.Error("store: a node of the cluster answers without qtop's tables (rebuilt empty?); its shard has one copy left "+
				"until they are restored from another replica: see docs/cluster.md, \"Rebuilding a node\"", "node", addr)
		}
	}
	for _, addr := range n.known {
		if !slices.Contains(missing, addr) {
			n.log.Info("store: the node has qtop's tables again", "node", addr)
		}
	}
	n.known = missing
}

// start checks now and then every schemaCheckEvery until ctx ends.
func (n *nodeCheck) start(ctx context.Context, wg *sync.WaitGroup) {
	if n == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.once(ctx)
		every(ctx, schemaCheckEvery, func() { n.once(ctx) })
	}()
}

// NodesWithoutSchema implements schemaChecker once the store is open (nil
// before, and for a store without a cluster to check).
func (l *lazyStore) NodesWithoutSchema(ctx context.Context) ([]string, error) {
	st, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	if sc, ok := st.(schemaChecker); ok {
		return sc.NodesWithoutSchema(ctx)
	}
	return nil, nil
}
