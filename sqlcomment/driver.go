package sqlcomment

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
)

// WrapDriver returns a driver whose connections comment every statement
// with the tags of its context (see Commenter.Comment) and report to the
// Observer of WithObserver. Register it with sql.Register, or use Register.
func WrapDriver(d driver.Driver, opts ...Option) driver.Driver {
	return &wrappedDriver{d: d, cm: NewCommenter(opts...)}
}

// WrapConnector returns a connector whose connections comment every
// statement with the tags of its context; pass it to sql.OpenDB.
func WrapConnector(c driver.Connector, opts ...Option) driver.Connector {
	cm := NewCommenter(opts...)
	return &connector{c: c, cm: cm, drv: &wrappedDriver{d: c.Driver(), cm: cm}}
}

// Open opens a database like sql.Open, through the driver registered as
// driverName wrapped with WrapDriver. The static tag db_driver is
// driverName unless opts set it with WithDBDriver.
func Open(driverName, dsn string, opts ...Option) (*sql.DB, error) {
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlcomment: %w", err)
	}
	d := db.Driver()
	if err := db.Close(); err != nil {
		return nil, fmt.Errorf("sqlcomment: %w", err)
	}
	opts = append([]Option{WithDBDriver(driverName)}, opts...)
	w := &wrappedDriver{d: d, cm: NewCommenter(opts...)}
	c, err := w.OpenConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlcomment: %w", err)
	}
	return sql.OpenDB(c), nil
}

// Register registers d, wrapped with WrapDriver, under name. Like
// sql.Register it panics when name is taken.
func Register(name string, d driver.Driver, opts ...Option) {
	sql.Register(name, WrapDriver(d, opts...))
}

type wrappedDriver struct {
	d  driver.Driver
	cm *Commenter
}

var (
	_ driver.Driver        = (*wrappedDriver)(nil)
	_ driver.DriverContext = (*wrappedDriver)(nil)
)

func (w *wrappedDriver) Open(name string) (driver.Conn, error) {
	c, err := w.d.Open(name)
	if err != nil {
		return nil, err
	}
	return newConn(c, w.cm), nil
}

// OpenConnector uses the wrapped driver's connector when it has one, and
// otherwise opens connections with its Open, as database/sql would.
func (w *wrappedDriver) OpenConnector(name string) (driver.Connector, error) {
	if dc, ok := w.d.(driver.DriverContext); ok {
		c, err := dc.OpenConnector(name)
		if err != nil {
			return nil, err
		}
		return &connector{c: c, cm: w.cm, drv: w}, nil
	}
	return &connector{c: dsnConnector{dsn: name, d: w.d}, cm: w.cm, drv: w}, nil
}

type dsnConnector struct {
	dsn string
	d   driver.Driver
}

func (t dsnConnector) Connect(context.Context) (driver.Conn, error) { return t.d.Open(t.dsn) }
func (t dsnConnector) Driver() driver.Driver                        { return t.d }

type connector struct {
	c   driver.Connector
	cm  *Commenter
	drv *wrappedDriver
}

var (
	_ driver.Connector = (*connector)(nil)
	_ io.Closer        = (*connector)(nil)
)

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newConn(cn, c.cm), nil
}

func (c *connector) Driver() driver.Driver { return c.drv }

// Close closes the wrapped connector when it is an io.Closer (sql.DB.Close
// calls it).
func (c *connector) Close() error {
	if cl, ok := c.c.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}
