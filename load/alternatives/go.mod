module github.com/svcgen/svcgen/load/alternatives

go 1.26.8

replace github.com/svcgen/svcgen => ../..

require (
	github.com/go-json-experiment/json v1.27.2
	github.com/goccy/go-yaml v1.19.2
	github.com/svcgen/svcgen v0.0.0-00010101000000-000000000000
	go.yaml.in/yaml/v3 v3.0.6
)
