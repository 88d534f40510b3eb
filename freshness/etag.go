package freshness

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrETag: an ETag is not one this server signed (garbage, truncated,
// forged, signed with an unknown key, or for another resource).
var ErrETag = errors.New("freshness: etag not signed by this server")

// ETag signing. A freshness ETag is
//
//	"q1.<response hash, 16 hex>.<computed at, unix seconds>.<tag, 16 hex>"
//
// where tag is HMAC-SHA256 (truncated to 64 bits) under a server key over
// the version, the resource (the request's path and query), the hash and
// the time. The client sends it back in If-None-Match, which tells the
// server, without any lookup, which response the client holds and how old
// it is. A client that edits the time to look fresh, or moves an ETag to
// another resource, breaks the tag: forging one takes about 2^64 online
// guesses. The HMAC is the whole defence, so the key must be secret and
// shared by every process that serves the resource.
const (
	etagVersion = "q1"
	// MinETagKey is the shortest key NewETagSigner accepts.
	MinETagKey = 16
	// MaxETagLen bounds one ETag that is parsed at all.
	MaxETagLen = 64
	// MaxIfNoneMatch bounds the If-None-Match header that is parsed; a
	// longer one is ignored (treated as absent).
	MaxIfNoneMatch = 512
)

// ETagSigner signs and verifies freshness ETags. Safe for concurrent use;
// make one with NewETagSigner.
type ETagSigner struct {
	keys  [][]byte
	pools []sync.Pool
}

// NewETagSigner returns a signer that signs with key and also accepts
// ETags signed with any of previous (for key rotation). Every key must be
// at least MinETagKey bytes.
func NewETagSigner(key []byte, previous ...[]byte) (*ETagSigner, error) {
	all := append([][]byte{key}, previous...)
	s := &ETagSigner{keys: make([][]byte, len(all)), pools: make([]sync.Pool, len(all))}
	for i, k := range all {
		if len(k) < MinETagKey {
			return nil, fmt.Errorf("%w: etag key %d of %d bytes (want ≥ %d)", ErrConfig, i, len(k), MinETagKey)
		}
		s.keys[i] = append([]byte(nil), k...)
		kk := s.keys[i]
		s.pools[i].New = func() any { return hmac.New(sha256.New, kk) }
	}
	return s, nil
}

func (s *ETagSigner) tag(i int, resource string, h uint64, at int64) uint64 {
	m := s.pools[i].Get().(hash.Hash)
	m.Reset()
	var b [2 + 1 + 8 + 8]byte
	copy(b[:], etagVersion)
	b[2] = 0
	binary.LittleEndian.PutUint64(b[3:], h)
	binary.LittleEndian.PutUint64(b[11:], uint64(at))
	m.Write(b[:])
	m.Write([]byte(resource))
	var sum [sha256.Size]byte
	out := m.Sum(sum[:0])
	s.pools[i].Put(m)
	return binary.BigEndian.Uint64(out)
}

// Sign returns the quoted ETag of a response of hash h to resource,
// computed at computed (kept to the second).
func (s *ETagSigner) Sign(resource string, h uint64, computed time.Time) string {
	at := computed.Unix()
	b := make([]byte, 0, 56)
	b = append(b, '"')
	b = append(b, etagVersion...)
	b = append(b, '.')
	b = appendHex64(b, h)
	b = append(b, '.')
	b = strconv.AppendInt(b, at, 10)
	b = append(b, '.')
	b = appendHex64(b, s.tag(0, resource, h, at))
	return string(append(b, '"'))
}

func appendHex64(b []byte, v uint64) []byte {
	var x [8]byte
	binary.BigEndian.PutUint64(x[:], v)
	return hex.AppendEncode(b, x[:])
}

func parseHex64(s string) (uint64, bool) {
	if len(s) != 16 {
		return 0, false
	}
	var x [8]byte
	if _, err := hex.Decode(x[:], []byte(s)); err != nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(x[:]), true
}

// Verify checks one ETag (quoted, or weak W/"…") for resource and returns
// the response hash and the time it was computed, or ErrETag.
func (s *ETagSigner) Verify(resource, etag string) (h uint64, computed time.Time, err error) {
	if len(etag) > MaxETagLen+2 {
		return 0, time.Time{}, fmt.Errorf("%w: %d bytes", ErrETag, len(etag))
	}
	etag = strings.TrimPrefix(etag, "W/")
	if len(etag) < 2 || etag[0] != '"' || etag[len(etag)-1] != '"' {
		return 0, time.Time{}, fmt.Errorf("%w: not a quoted etag", ErrETag)
	}
	parts := strings.Split(etag[1:len(etag)-1], ".")
	if len(parts) != 4 || parts[0] != etagVersion {
		return 0, time.Time{}, fmt.Errorf("%w: not a freshness etag", ErrETag)
	}
	h, ok1 := parseHex64(parts[1])
	at, err2 := strconv.ParseInt(parts[2], 10, 64)
	tag, ok3 := parseHex64(parts[3])
	if !ok1 || err2 != nil || !ok3 || at < 0 || at > 1<<40 {
		return 0, time.Time{}, fmt.Errorf("%w: malformed", ErrETag)
	}
	for i := range s.keys {
		want := s.tag(i, resource, h, at)
		var a, b [8]byte
		binary.BigEndian.PutUint64(a[:], want)
		binary.BigEndian.PutUint64(b[:], tag)
		if hmac.Equal(a[:], b[:]) {
			return h, time.Unix(at, 0), nil
		}
	}
	return 0, time.Time{}, fmt.Errorf("%w: bad signature", ErrETag)
}

// VerifyIfNoneMatch reads an If-None-Match header value (a list of
// ETags) and returns the first ETag of it this server signed for
// resource, with its hash and time. A header longer than MaxIfNoneMatch,
// "*", or one with no valid ETag gives ok false.
func (s *ETagSigner) VerifyIfNoneMatch(resource, header string) (etag string, h uint64, computed time.Time, ok bool) {
	if header == "" || len(header) > MaxIfNoneMatch {
		return "", 0, time.Time{}, false
	}
	for n := 0; header != "" && n < 8; n++ {
		var one string
		one, header, _ = strings.Cut(header, ",")
		one = strings.TrimSpace(one)
		if hh, at, err := s.Verify(resource, one); err == nil {
			return one, hh, at, true
		}
	}
	return "", 0, time.Time{}, false
}

// ResponseHash is the hash a freshness ETag carries: the first 64 bits of
// SHA-256 of the body.
func ResponseHash(body []byte) uint64 {
	sum := sha256.Sum256(body)
	return binary.BigEndian.Uint64(sum[:8])
}
