package chstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/store"
)

// unavailableCodes are the server's error codes that say a part of the
// cluster cannot take a write now, whatever the batch: the spool must keep
// the batch and retry it, not take it for a poison batch, even though the
// node it pings answers (store.ErrUnavailable).
var unavailableCodes = map[int32]string{
	// A node without qtop's tables: a replica rebuilt empty that a
	// Distributed insert reached (docs/cluster.md, "Rebuilding a node").
	// Its shard's other replica takes the next try, or the tables come
	// back; the rows are not at fault.
	60:  "UNKNOWN_TABLE",
	81:  "UNKNOWN_DATABASE",
	159: "TIMEOUT_EXCEEDED",
	202: "TOO_MANY_SIMULTANEOUS_QUERIES",
	209: "SOCKET_TIMEOUT",
	210: "NETWORK_ERROR",
	225: "NO_ZOOKEEPER",
	236: "ABORTED",
	241: "MEMORY_LIMIT_EXCEEDED",
	242: "TABLE_IS_READ_ONLY", // a Replicated table without ZooKeeper
	252: "TOO_MANY_PARTS",
	279: "ALL_CONNECTION_TRIES_FAILED", // every replica of a shard is down
	285: "TOO_FEW_LIVE_REPLICAS",
	286: "UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE",
	319: "UNKNOWN_STATUS_OF_INSERT",
	999: "KEEPER_EXCEPTION",
}

// classify wraps err with store.ErrUnavailable when it is an outage of
// the store or of a part of it (the codes above, a connection that failed
// or timed out) rather than something about the rows written.
func classify(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrClosed) {
		return err
	}
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		if _, ok := unavailableCodes[ex.Code]; ok {
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, clickhouse.ErrAcquireConnTimeout) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}
