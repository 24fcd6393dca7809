module github.com/meshless/meshless/e2e

go 1.26.0

require (
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
)

require github.com/stretchr/testify v1.12.1 // indirect
