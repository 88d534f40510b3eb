package sqlcomment

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
	"unsafe"

	"github.com/qtop-dev/qtop/sqlcomment/internal/lex"
)

// pair is one key='value' of a comment, before encoding.
type pair struct{ k, v string }

// Format returns the sqlcommenter comment for tags, "/*k='v',…*/", with keys
// sorted and keys and values URL-encoded as encodeURIComponent does (space
// as %20), then ' escaped as \'. It returns "" for no tags.
//
// No key or value can close the comment or open a nested one: '/' is always
// percent-encoded, so "*/" and "/*" never appear inside.
func Format(tags map[string]string) string {
	if len(tags) == 0 {
		return ""
	}
	var kv knownValues
	if kv.collect(tags) {
		var tmp [stackBuf]byte
		m := kv.render(tmp[:])
		return string(tmp[:m])
	}
	if len(tags) > len([16]pair{}) {
		return formatSorted(tags)
	}
	// Sorted in a local array by direct stores: the compiler knows it is
	// on the stack, so the pointer moves need no GC write barrier (which
	// cost a fifth of the time when the sort went through a slice).
	var buf [16]pair
	n := 0
	for k, v := range tags {
		buf[n] = pair{k, v}
		for j := n; j > 0 && keyLess(buf[j].k, buf[j-1].k); j-- {
			buf[j], buf[j-1] = buf[j-1], buf[j]
		}
		n++
	}
	ps := buf[:n]
	if maxCommentLen(ps) <= stackBuf {
		var tmp [stackBuf]byte
		m := render(tmp[:], ps)
		return string(tmp[:m])
	}
	b := make([]byte, commentLen(ps))
	render(b, ps)
	return unsafe.String(&b[0], len(b))
}

// knownKeys are the keys this package writes, in sorted order: a map whose
// keys are all among them (the usual case) is sorted by placing each value
// at its key's rank, with no comparisons between keys.
var knownKeys = [...]string{KeyApplication, KeyDBDriver, KeyKey, KeyRoute, KeyTenant, KeyTier, KeyTraceparent, KeyTracestate}

// knownRank returns the index of k in knownKeys, or -1.
func knownRank(k string) int {
	switch len(k) {
	case 3:
		if k == KeyKey {
			return 2
		}
	case 4:
		if k == KeyTier {
			return 5
		}
	case 5:
		if k == KeyRoute {
			return 3
		}
	case 6:
		if k == KeyTenant {
			return 4
		}
	case 9:
		if k == KeyDBDriver {
			return 1
		}
	case 10:
		if k == KeyTracestate {
			return 7
		}
	case 11:
		if k == KeyApplication {
			return 0
		}
		if k == KeyTraceparent {
			return 6
		}
	}
	return -1
}

// knownValues holds the values of a map whose keys are all known keys, at
// their keys' ranks.
type knownValues struct {
	v   [len(knownKeys)]string
	set uint8 // bit r: v[r] is set
}

// collect fills kv from tags and reports whether every key is a known key
// and the comment surely fits the stack buffer (render's precondition).
func (kv *knownValues) collect(tags map[string]string) bool {
	if len(tags) > len(knownKeys) {
		return false
	}
	n := 0
	for k, v := range tags {
		r := knownRank(k)
		if r < 0 {
			return false
		}
		kv.v[r] = v
		kv.set |= 1 << r
		n += len(v)
	}
	// Each known key is at most 11 bytes and plain; each value encodes
	// to at most 3 bytes a byte; 4 for "/*…*/", 4 per pair for ='',.
	return 4+len(tags)*(11+4)+3*n <= stackBuf
}

// render writes the comment at the start of b and returns its length.
func (kv *knownValues) render(b []byte) int {
	b[0], b[1] = '/', '*'
	i := 2
	for r, k := range knownKeys {
		if kv.set&(1<<r) == 0 {
			continue
		}
		if i > 2 {
			b[i] = ','
			i++
		}
		i += copy(b[i:], k)
		b[i], b[i+1] = '=', '\''
		i = encodeInto(b, i+2, kv.v[r])
		b[i] = '\''
		i++
	}
	b[i], b[i+1] = '*', '/'
	return i + 2
}

// formatSorted is Format for any number of tags: the pairs in a slice,
// sorted, rendered into one allocation of the exact size.
func formatSorted(tags map[string]string) string {
	ps := sortedPairs(tags)
	b := make([]byte, commentLen(ps))
	render(b, ps)
	return unsafe.String(&b[0], len(b))
}

// sortedPairs returns the pairs of tags in a new slice, sorted by key.
func sortedPairs(tags map[string]string) []pair {
	ps := make([]pair, 0, len(tags))
	for k, v := range tags {
		ps = append(ps, pair{k, v})
	}
	sortPairs(ps)
	return ps
}

// keyLess is a < b, deciding on the first byte inline when it differs,
// which it does for most tag keys.
func keyLess(a, b string) bool {
	if len(a) > 0 && len(b) > 0 && a[0] != b[0] {
		return a[0] < b[0]
	}
	return a < b
}

// stackBuf is the size of the stack buffer comments are rendered into
// when they surely fit, which saves a pass to compute their exact length.
const stackBuf = 512

// Append returns query with the comment for tags appended, as Format writes
// it, after the statement and before a trailing ';' and trailing white
// space. The inserted text is exactly " " + Format(tags); nothing else in
// query changes.
//
// Query is returned unchanged when tags is empty, when query is empty (only
// white space and semicolons), when it already has a comment (/* or --
// outside string literals, quoted identifiers and dollar quotes), or when a
// literal or quoted identifier is left open (appending would land inside it).
func Append(query string, tags map[string]string) string {
	if len(tags) == 0 {
		return query
	}
	at, ok := insertAt(query)
	if !ok {
		return query
	}
	var kv knownValues
	if kv.collect(tags) {
		var tmp [stackBuf]byte
		m := kv.render(tmp[:])
		return spliceRendered(query, at, tmp[:m])
	}
	if len(tags) > len([16]pair{}) {
		return splice(query, at, sortedPairs(tags))
	}
	var buf [16]pair // as in Format
	n := 0
	for k, v := range tags {
		buf[n] = pair{k, v}
		for j := n; j > 0 && keyLess(buf[j].k, buf[j-1].k); j-- {
			buf[j], buf[j-1] = buf[j-1], buf[j]
		}
		n++
	}
	return splice(query, at, buf[:n])
}

// splice inserts " /*…*/" for the sorted pairs ps at byte at of query, in one
// allocation.
func splice(query string, at int, ps []pair) string {
	if maxCommentLen(ps) <= stackBuf {
		var tmp [stackBuf]byte
		n := render(tmp[:], ps)
		return spliceRendered(query, at, tmp[:n])
	}
	n := commentLen(ps)
	b := make([]byte, len(query)+1+n)
	copy(b, query[:at])
	b[at] = ' '
	render(b[at+1:at+1+n], ps)
	copy(b[at+1+n:], query[at:])
	return unsafe.String(&b[0], len(b))
}

// spliceRendered inserts " " + comment at byte at of query.
func spliceRendered(query string, at int, comment []byte) string {
	n := len(comment)
	b := make([]byte, len(query)+1+n)
	copy(b, query[:at])
	b[at] = ' '
	copy(b[at+1:], comment)
	copy(b[at+1+n:], query[at:])
	return unsafe.String(&b[0], len(b))
}

// maxCommentLen bounds commentLen(ps) without reading the values: each
// byte encodes to at most 3.
func maxCommentLen(ps []pair) int {
	n := 4 + len(ps)
	for _, p := range ps {
		n += 3*len(p.k) + 3 + 3*len(p.v)
	}
	return n
}

func sortPairs(ps []pair) {
	if len(ps) > 16 {
		slices.SortFunc(ps, func(a, b pair) int { return strings.Compare(a.k, b.k) })
		return
	}
	// Insertion sort: comments have a handful of tags.
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].k < ps[j-1].k; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// commentLen is the length of the comment for ps, "/*" and "*/" included.
func commentLen(ps []pair) int {
	if len(ps) == 0 {
		return 0
	}
	n := 4 + len(ps) - 1 // /* */ and commas
	for _, p := range ps {
		n += pairLen(p)
	}
	return n
}

// pairLen is the encoded length of k='v'.
func pairLen(p pair) int { return encodedLen(p.k) + 3 + encodedLen(p.v) }

// render writes the comment for ps at the start of b, which holds at least
// commentLen(ps) bytes, and returns its length. It writes bytes by index
// into a buffer the caller sized: no appends, no growth.
func render(b []byte, ps []pair) int { return renderAfter(b, "", ps) }

// renderAfter is render with an already encoded prefix of pairs (without
// a trailing comma) before ps.
func renderAfter(b []byte, prefix string, ps []pair) int {
	b[0], b[1] = '/', '*'
	i := 2 + copy(b[2:], prefix)
	for j, p := range ps {
		if j > 0 || prefix != "" {
			b[i] = ','
			i++
		}
		i = encodeInto(b, i, p.k)
		b[i], b[i+1] = '=', '\''
		i = encodeInto(b, i+2, p.v)
		b[i] = '\''
		i++
	}
	b[i], b[i+1] = '*', '/'
	return i + 2
}

// unreserved marks the bytes encodeURIComponent leaves alone:
// A–Z a–z 0–9 - _ . ! ~ * ' ( ).
var unreserved = func() (t [256]bool) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-_.!~*'()" {
		t[c] = true
	}
	return t
}()

// plain marks the bytes written as they are: unreserved, less the quote.
var plain = func() [256]bool {
	t := unreserved
	t['\''] = false
	return t
}()

// encodedLen is the length of s once percent-encoded and with ' escaped.
func encodedLen(s string) int {
	n := len(s)
	for {
		k := plainRun(s)
		if k == len(s) {
			return n
		}
		if s[k] == '\'' {
			n++ // \'
		} else {
			n += 2 // %XX
		}
		s = s[k+1:]
	}
}

const hexDigits = "0123456789ABCDEF"

// encodeInto writes s at b[i:], percent-encoding every byte outside the
// unreserved set (byte by byte, so invalid UTF-8 survives the round trip)
// and escaping ' as \', and returns the index past it. b[i:] holds at
// least 3*len(s)+3 bytes (in a comment, the value's worst case and the
// closing '*/).
//
// It moves eight bytes at a time while they pass plain8, checking and
// copying in one pass, with no table lookup per byte and no memmove call
// per value; a word that fails goes byte by byte with the exact table.
func encodeInto(b []byte, i int, s string) int {
	src := unsafe.Slice(unsafe.StringData(s), len(s))
	if n := len(src); n < 8 {
		if n >= 4 {
			// Short keys and values (tier, route, tenant): the word is
			// the first four bytes and the last four, overlapping.
			lo, hi := binary.LittleEndian.Uint32(src), binary.LittleEndian.Uint32(src[n-4:])
			if plain8(uint64(lo) | uint64(hi)<<32) {
				binary.LittleEndian.PutUint32(b[i:], lo)
				binary.LittleEndian.PutUint32(b[i+n-4:], hi)
				return i + n
			}
		}
		return encodeBytes(b, i, src)
	}
	start, k := i, 0
	for ; k+8 <= len(src); k += 8 {
		x := binary.LittleEndian.Uint64(src[k:])
		if !plain8(x) {
			i = encodeBytes(b, i, src[k:k+8])
			continue
		}
		binary.LittleEndian.PutUint64(b[i:], x)
		i += 8
	}
	if r := len(src) - k; r > 0 && k > 0 && i-start == k {
		// All plain so far, so output and input are aligned: test the
		// tail in the last eight bytes, overlapping some already copied.
		if x := binary.LittleEndian.Uint64(src[len(src)-8:]); plain8(x) {
			binary.LittleEndian.PutUint64(b[i+r-8:], x)
			return i + r
		}
	}
	return encodeBytes(b, i, src[k:])
}

// encodeBytes is encodeInto byte by byte, without a branch: each byte's
// encoding (see escapes) is stored as four bytes and the index moves by
// its length; the bytes past it are overwritten by what follows. Every
// key and value is followed in the comment by at least three more bytes
// (a key by = and a value's two quotes, a value by its closing quote and
// */), so the four-byte store stays within the comment.
func encodeBytes(b []byte, i int, src []byte) int {
	for _, c := range src {
		e := escapes[c]
		binary.LittleEndian.PutUint32(b[i:], e)
		i += int(e >> 24)
	}
	return i
}

// escapes holds each byte's encoding in its low three bytes, little
// endian, and the encoding's length in the top byte: the byte itself for
// plain bytes, \' for the quote, %XX for the others.
var escapes = func() (t [256]uint32) {
	for c := range t {
		switch {
		case plain[c]:
			t[c] = uint32(c) | 1<<24
		case c == '\'':
			t[c] = '\\' | '\''<<8 | 2<<24
		default:
			t[c] = '%' | uint32(hexDigits[c>>4])<<8 | uint32(hexDigits[c&15])<<16 | 3<<24
		}
	}
	return t
}()

// Bytes of a little-endian word, for plain8.
const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// plain8 reports whether the eight bytes of x are all letters, digits,
// '-', '.' or '_': a subset of the plain bytes that covers nearly all of
// real keys and values, tested in a dozen word operations. A byte without
// its high bit is in [lo, hi] when adding 0x80-lo sets the high bit and
// adding 0x7f-hi does not (no sum carries into the next byte); folding in
// 0x20 maps A–Z onto a–z and nothing else there.
func plain8(x uint64) bool {
	lower := x | ones*0x20
	az := (lower + ones*(0x80-'a')) &^ (lower + ones*(0x7f-'z'))
	digit := (x + ones*(0x80-'0')) &^ (x + ones*(0x7f-'9'))
	dash := (x + ones*(0x80-'-')) &^ (x + ones*(0x7f-'.'))
	under := (x + ones*(0x80-'_')) &^ (x + ones*(0x7f-'_'))
	return (az|digit|dash|under)&high == high && x&high == 0
}

// plainRun returns the length of the prefix of s written as it is.
func plainRun(s string) int {
	i := 0
	for ; i+4 <= len(s); i += 4 {
		if !plain[s[i]] || !plain[s[i+1]] || !plain[s[i+2]] || !plain[s[i+3]] {
			break
		}
	}
	for ; i < len(s); i++ {
		if !plain[s[i]] {
			return i
		}
	}
	return len(s)
}

// insertAt returns where the comment goes in query: before the trailing run
// of ';' and white space. ok is false when query must be left unchanged:
// it is empty, it has a comment, or it ends inside a literal.
func insertAt(query string) (at int, ok bool) {
	end := len(query)
	for end > 0 && (query[end-1] == ';' || lex.IsSpace(query[end-1])) {
		end--
	}
	if end == 0 {
		return 0, false
	}
	s := scan(query[:end])
	if s.comment || s.open {
		return 0, false
	}
	return end, true
}

// scanResult describes a statement's lexical structure, as far as comments
// are concerned.
type scanResult struct {
	comment bool // a /* or -- outside literals
	open    bool // ends inside a literal, quoted identifier or dollar quote
	// lastStart and lastEnd delimit the last block comment (lastEnd is past
	// "*/"), or are -1. lastEnd is -1 when that comment is left open.
	lastStart, lastEnd int
}

// scan lexes query the way PostgreSQL does for the parts that matter here:
// '…' literals (a doubled quote stays inside; E'…' also escapes with \), "…"
// identifiers, $tag$…$tag$ dollar quotes, -- line comments and nested
// /* … */ block comments.
func scan(q string) scanResult {
	r := scanResult{lastStart: -1, lastEnd: -1}
	b := unsafe.Slice(unsafe.StringData(q), len(q))
	for i := 0; i < len(q); {
		// Eight bytes at a time to the next special byte, one by one in
		// the last seven.
		if i+8 <= len(b) {
			m := specials8(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		} else if !special[q[i]] {
			i++
			continue
		}
		c := q[i]
		switch {
		case c == '\'':
			escapes := i > 0 && (q[i-1] == 'E' || q[i-1] == 'e') && (i == 1 || !lex.IsIdent(q[i-2]))
			j, ok := lex.SkipQuoted(q, i+1, '\'', escapes)
			if !ok {
				r.open = true
				return r
			}
			i = j
		case c == '"':
			j, ok := lex.SkipQuoted(q, i+1, '"', false)
			if !ok {
				r.open = true
				return r
			}
			i = j
		case c == '$' && (i == 0 || !lex.IsIdent(q[i-1])):
			tagEnd, ok := lex.DollarTag(q, i)
			if !ok {
				i++
				continue
			}
			tag := q[i:tagEnd]
			k := strings.Index(q[tagEnd:], tag)
			if k < 0 {
				r.open = true
				return r
			}
			i = tagEnd + k + len(tag)
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			r.comment = true
			k := strings.IndexByte(q[i:], '\n')
			if k < 0 {
				return r
			}
			i += k + 1
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			r.comment = true
			r.lastStart = i
			j, ok := lex.SkipBlockComment(q, i+2)
			if !ok {
				r.lastEnd = -1
				r.open = true
				return r
			}
			r.lastEnd = j
			i = j
		default:
			i++
		}
	}
	return r
}

// specials8 returns a word whose lowest set bit is the high bit of the
// first byte of x (little endian) that special marks, or 0 if there is
// none. A byte of x^c is zero where x has c; (v-ones)&^v&high flags the
// first zero byte of v exactly (only bits above it can be false).
func specials8(x uint64) uint64 {
	zero := func(v uint64) uint64 { return (v - ones) &^ v & high }
	return zero(x^ones*'\'') | zero(x^ones*'"') | zero(x^ones*'$') |
		zero(x^ones*'-') | zero(x^ones*'/')
}

// special marks the bytes where scan has something to look at.
var special = func() (t [256]bool) {
	for _, c := range "'\"$-/" {
		t[c] = true
	}
	return t
}()
