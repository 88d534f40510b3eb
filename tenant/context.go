package tenant

import "context"

// Context is a context.Context that carries Tags, for a middleware that
// makes one struct per request: embedding a Context in it carries the
// request's tags with no allocation of their own, where With allocates
// twice. From and Lookup find the tags of a Context, and of any context
// derived from it, as they find those of With.
type Context struct {
	context.Context
	Tags Tags
}

// Value returns the Context's tags for the key From uses, and otherwise
// the value of the parent context.
func (c *Context) Value(key any) any {
	if _, ok := key.(ctxKey); ok {
		return &c.Tags
	}
	return c.Context.Value(key)
}
