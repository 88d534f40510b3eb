module github.com/qtop-dev/qtop/bench

go 1.26.0

replace github.com/qtop-dev/qtop => ../

require github.com/qtop-dev/qtop v0.0.0-00010101000000-000000000000

require (
	github.com/DataDog/sketches-go v1.4.8 // indirect
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/OneOfOne/xxhash v1.2.8 // indirect
	github.com/dgryski/go-sip13 v0.0.0-20200911182023-62edffca9245 // indirect
	github.com/dgryski/go-topk v0.0.0-20191119021947-593b4f2374c9 // indirect
	github.com/google/sqlcommenter/go/core v0.1.2 // indirect
	github.com/google/sqlcommenter/go/database/sql v0.1.1 // indirect
	github.com/segmentio/topk v0.1.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
