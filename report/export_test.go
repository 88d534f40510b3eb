package report

// MarshalUncompressed is marshalUncompressed for the external tests.
func (r *Report) MarshalUncompressed() ([]byte, error) { return r.marshalUncompressed() }

// ReadHexDump is readHexDump for the external tests.
var ReadHexDump = readHexDump
