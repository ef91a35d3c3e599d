module github.com/cowstate/cowstate

go 1.26

require (
	github.com/benbjohnson/immutable v0.4.3
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/google/btree v1.1.3
	github.com/tidwall/btree v1.8.2
	pgregory.net/rapid v1.3.0
)

require golang.org/x/exp v0.0.0-20220518171630-0b5c67f07fdf // indirect
