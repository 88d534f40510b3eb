package comment

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/qtop-dev/qtop/tenant"
)

// MaxApplicationNameLen is how many bytes of application_name PostgreSQL
// keeps (NAMEDATALEN - 1); it shows each byte outside printable ASCII as
// '?'. ApplicationName never writes more, nor any such byte.
const MaxApplicationNameLen = 63

// maxTenantField is the longest tenant field ApplicationName writes
// verbatim (percent-encoded); a longer one is replaced by TenantID, so a
// service keeps at least 17 bytes.
const maxTenantField = 40

// The separators of the session tag: service|t=tenant|T2.
const (
	appTenantSep = "|t="
	appTierSep   = "|T"
)

// AppName is what ApplicationName wrote in an application_name.
type AppName struct {
	// Service is the name the application set (WithApplication), so that
	// grouping by application_name still groups by service.
	Service string
	// Tenant is the tenant's name, or its TenantID when ID is true (the
	// name was too long or not ASCII once encoded).
	Tenant string
	ID     bool
	Tier   tenant.Tier
}

// ApplicationName returns the application_name that carries service and
// the tenant and tier of t, in at most MaxApplicationNameLen printable
// ASCII bytes:
//
//	billing|t=acme|T2
//
// The service comes first, cut to leave room for the rest; its bytes
// outside printable ASCII, the bar, the single quote and the backslash
// become '_'. The tenant is percent-encoded (the same bytes, '%' and
// '~') and, when that takes more than 40 bytes, replaced by
// TenantID(t.Tenant), which starts with '~'. The tier follows when set.
// Without a tenant the result is the service alone. ParseApplicationName
// is the inverse.
func ApplicationName(service string, t tenant.Tags) string {
	svc := cleanService(service)
	if t.Tenant == "" {
		return cut(svc, MaxApplicationNameLen)
	}
	field := tenantField(t.Tenant)
	tail := len(appTenantSep) + len(field)
	if t.Tier.Valid() {
		tail += len(appTierSep) + 1
	}
	var b strings.Builder
	svc = cut(svc, MaxApplicationNameLen-tail)
	b.Grow(len(svc) + tail)
	b.WriteString(svc)
	b.WriteString(appTenantSep)
	b.WriteString(field)
	if t.Tier.Valid() {
		b.WriteString(appTierSep)
		b.WriteByte(byte('0' + t.Tier.Index()))
	}
	return b.String()
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// cleanService makes s printable ASCII without the bytes the tag or a SQL
// literal would read specially.
func cleanService(s string) string {
	ok := true
	for i := 0; i < len(s) && ok; i++ {
		ok = serviceByte(s[i])
	}
	if ok {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if !serviceByte(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

func serviceByte(c byte) bool { return c >= 0x20 && c < 0x7f && c != '|' && c != '\'' && c != '\\' }

// tenantByte reports whether c is written as is in the tenant field.
func tenantByte(c byte) bool {
	return c >= 0x20 && c < 0x7f && c != '%' && c != '|' && c != '\'' && c != '\\' && c != '~'
}

// encodedLen is the length of name percent-encoded in the tenant field.
func encodedLen(name string) int {
	n := 0
	for i := 0; i < len(name); i++ {
		if tenantByte(name[i]) {
			n++
		} else {
			n += 3
		}
	}
	return n
}

// WrittenID returns TenantID(name) and true when ApplicationName writes
// the tenant name as its id (it takes more than 40 bytes once encoded),
// and "" and false when it writes the name itself. A reader that sees the
// name in a statement's comment can so map the id back to it.
func WrittenID(name string) (string, bool) {
	if encodedLen(name) > maxTenantField {
		return TenantID(name), true
	}
	return "", false
}

func tenantField(name string) string {
	n := encodedLen(name)
	if n > maxTenantField {
		return TenantID(name)
	}
	if n == len(name) {
		return name
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, n)
	for i := 0; i < len(name); i++ {
		if c := name[i]; tenantByte(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(b)
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// TenantID returns the stable short id ApplicationName writes for a
// tenant whose name does not fit: '~' and the first 60 bits of the name's
// SHA-256 in lower-case base32 (13 bytes). The same name has the same id
// in every process; the collector maps it back with the names the
// application reports (see TenantNames). An id read back is always an
// id: a name's own '~' is percent-encoded, and a tenant whose name has
// the form of an id (tenant.IsSessionID) is counted by every reader under
// its stand-in (tenant.Escape), the name Commenter.ApplicationName writes
// for it.
func TenantID(name string) string {
	sum := sha256.Sum256([]byte(name))
	var out [13]byte
	out[0] = '~'
	var enc [13]byte
	idEncoding.Encode(enc[:], sum[:8]) // 64 bits → 13 characters; keep 12
	copy(out[1:], enc[:12])
	return string(out[:])
}

// ParseApplicationName reads back what ApplicationName wrote. It reports
// false for a name without a tenant field, or with a malformed one (a bad
// percent escape, an empty tenant, a tenant that tenant.ValidateTenant
// refuses, an id of the wrong form). The service is whatever precedes the
// last "|t=".
func ParseApplicationName(s string) (AppName, bool) {
	var a AppName
	if n := len(s); n >= 3 && s[n-3:n-1] == appTierSep && s[n-1] >= '0' && s[n-1] <= '3' {
		a.Tier = tenant.T0 + tenant.Tier(s[n-1]-'0')
		s = s[:n-3]
	}
	i := strings.LastIndex(s, appTenantSep)
	if i < 0 {
		return AppName{}, false
	}
	a.Service, s = s[:i], s[i+len(appTenantSep):]
	if strings.HasPrefix(s, "~") {
		if !tenant.IsSessionID(s) {
			return AppName{}, false
		}
		a.Tenant, a.ID = s, true
		return a, true
	}
	name, ok := unescapeTenant(s)
	if !ok || tenant.ValidateTenant(name) != nil {
		return AppName{}, false
	}
	a.Tenant = name
	return a, true
}

func unescapeTenant(s string) (string, bool) {
	if s == "" || len(s) > maxTenantField {
		return "", false
	}
	if !strings.Contains(s, "%") {
		for i := 0; i < len(s); i++ {
			if !tenantByte(s[i]) {
				return "", false
			}
		}
		return s, true
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if !tenantByte(c) {
				return "", false
			}
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		h, l := unhexUpper(s[i+1]), unhexUpper(s[i+2])
		if h < 0 || l < 0 {
			return "", false
		}
		b = append(b, byte(h<<4|l))
		i += 2
	}
	return string(b), true
}

func unhexUpper(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
