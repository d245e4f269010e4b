module github.com/svcgen/svcgen/tools/diffbench

go 1.26.8

require (
	github.com/aymanbagabas/go-udiff v0.4.1
	github.com/hexops/gotextdiff v1.0.3
	github.com/pmezard/go-difflib v1.0.0
	github.com/rogpeppe/go-internal v1.16.0
)
