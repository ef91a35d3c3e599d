module github.com/cowstate/cowstate/contrib/protocodec

go 1.26.0

require (
	github.com/cowstate/cowstate v0.0.0
	google.golang.org/protobuf v1.36.12
)

require github.com/cespare/xxhash/v2 v2.3.0 // indirect

replace github.com/cowstate/cowstate => ../..
