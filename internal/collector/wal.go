package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/report"
)

// The write-ahead log keeps every accepted report body, one file per
// minute (named by the minute's Unix time), as records
//
//	uint32 length | uint32 CRC-32C of the body | body
//
// A report is appended before it is acknowledged; a minute's file is
// deleted once its rollups are written (or spooled) and no late report can
// change them any more. A torn record at the end of a file (a crash during
// the write, so never acknowledged) is cut off when the file is replayed.

var crcTable = crc32.MakeTable(crc32.Castagnoli)

const walSuffix = ".wal"

// walFile is one minute's log. Its methods are safe for concurrent use:
// reports are appended outside the collector's merge lock.
type walFile struct {
	mu   sync.Mutex
	f    *os.File
	path string
	size atomic.Int64
	buf  []byte
}

func walPath(dir string, m time.Time) string {
	return filepath.Join(dir, strconv.FormatInt(m.Unix(), 10)+walSuffix)
}

func openWAL(dir string, m time.Time) (*walFile, error) {
	p := walPath(dir, m)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("collector: wal: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("collector: wal: %w", err)
	}
	w := &walFile{f: f, path: p}
	w.size.Store(st.Size())
	return w, nil
}

// append writes one record with a single write call.
func (w *walFile) append(body []byte) error {
	sum := crc32.Checksum(body, crcTable)
	w.mu.Lock()
	defer w.mu.Unlock()
	if cap(w.buf) < 8+len(body) || cap(w.buf) > 1<<20 && len(body) < 64<<10 {
		w.buf = make([]byte, 8+len(body))
	}
	rec := w.buf[:8+len(body)]
	binary.LittleEndian.PutUint32(rec, uint32(len(body)))
	binary.LittleEndian.PutUint32(rec[4:], sum)
	copy(rec[8:], body)
	n, err := w.f.Write(rec)
	if err != nil {
		// Cut a partial record so the file stays well formed.
		if n > 0 {
			w.f.Truncate(w.size.Load())
		}
		return fmt.Errorf("collector: wal: %w", err)
	}
	w.size.Add(int64(n))
	return nil
}

// sync flushes the file to disk without w.mu: appends go on while it
// runs (an fsync of a busy second's log can take tens of milliseconds,
// and every report of the minute would wait for it). An os.File may be
// synced while written; closed meanwhile (remove), the sync ends with
// an error that changes nothing.
func (w *walFile) sync() error {
	return w.f.Sync()
}

func (w *walFile) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Close()
}

func (w *walFile) remove() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.f.Close()
	return os.Remove(w.path)
}

// walMinutes lists the minutes that have a file in dir, oldest first.
func walMinutes(dir string) ([]time.Time, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("collector: wal: %w", err)
	}
	var out []time.Time
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), walSuffix)
		if !ok || e.IsDir() {
			continue
		}
		sec, err := strconv.ParseInt(name, 10, 64)
		if err != nil || sec%60 != 0 {
			continue
		}
		out = append(out, time.Unix(sec, 0).UTC())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out, nil
}

// readWAL calls fn with every intact record of the file at path, in order.
// It truncates the file after the last intact record and returns how many
// bytes it cut.
func readWAL(path string, fn func(body []byte) error) (cut int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("collector: wal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("collector: wal: %w", err)
	}
	var off int64
	hdr := make([]byte, 8)
	var body []byte
	for {
		if _, err := io.ReadFull(f, hdr); err != nil {
			break
		}
		n := binary.LittleEndian.Uint32(hdr)
		if n > report.MaxReportBytes {
			break
		}
		if cap(body) < int(n) {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(f, body); err != nil {
			break
		}
		if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
			break
		}
		if err := fn(body); err != nil {
			return 0, err
		}
		off += 8 + int64(n)
	}
	if off < st.Size() {
		if err := f.Truncate(off); err != nil {
			return 0, fmt.Errorf("collector: wal: %w", err)
		}
	}
	return st.Size() - off, nil
}

// appendReport appends rep's body raw to the log, encoding rep when the
// caller had no body (a report handed over in process).
func (w *walFile) appendReport(rep *report.Report, raw []byte) error {
	if raw == nil {
		var err error
		if raw, err = rep.MarshalBinary(); err != nil {
			return err
		}
	}
	return w.append(raw)
}
