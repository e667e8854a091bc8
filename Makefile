# Development tasks. buf is pinned and installed from npm into .ci/.tools (it
# cannot share go.mod with the protoc plugins); everything else runs through
# go.mod tool directives.
BUF_VERSION := 1.75.0
BUF := .ci/.tools/node_modules/.bin/buf

.PHONY: all generate lint test bench run ci

all: generate lint test

$(BUF):
	npm install --prefix .ci/.tools --no-audit --no-fund --loglevel=error @bufbuild/buf@$(BUF_VERSION)

generate: $(BUF)
	$(BUF) generate
	cd edge/internal/graphql && go tool gqlgen

lint: $(BUF)
	$(BUF) lint
	gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$' | grep -v '\.pb\.gw\.go$$')
	go vet ./...

test:
	go test ./...

bench:
	go run ./cmd/bench

run:
	go run .

ci:
	bash .ci/run
