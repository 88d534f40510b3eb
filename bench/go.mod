module github.com/qtop-dev/qtop/bench

go 1.26

replace github.com/qtop-dev/qtop => ../
