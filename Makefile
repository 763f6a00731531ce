# chronoq — run `make help` for the targets.
GO ?= go
PKGS := ./...

.PHONY: help deps test test-race test-short test-embedded test-load bench bench-bounded bench-peer bench-http lint fmt generate generate-check fuzz chaos chaos-short examples examples-deps openapi-tools-deps

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

deps: ## install redis-server (and redis-cli) when missing (as root, from Debian's packages)
	@scripts/ensure-deps.sh

test: deps examples-deps openapi-tools-deps lint ## the whole suite, race detector on, single Redis and Redis Cluster; then test-embedded and test-load
	$(GO) test -race -count=1 -timeout 10m $(PKGS)
	@$(MAKE) --no-print-directory test-embedded
	@$(MAKE) --no-print-directory test-load

# The zero-setup default (`chronoq serve` with no Redis and no redis-server
# on the PATH) runs on an embedded Redis (miniredis), whose scripts run on
# gopher-lua, not on Redis's Lua: the engine's single-Redis contract suites
# and the whole HTTP API suite run again on it, so that a script that only
# redis-server runs right cannot come back. Tests that need a redis-server
# process (a Cluster, a server to kill, CLIENT LIST) skip there and say why.
test-embedded: ## the queue's single-Redis contract suites and the HTTP API suite on the embedded Redis (CHRONOQ_TEST_REDIS=embedded)
	CHRONOQ_TEST_REDIS=embedded $(GO) test -count=1 -timeout 10m -run 'Single$$' ./queue/
	CHRONOQ_TEST_REDIS=embedded $(GO) test -count=1 -timeout 10m ./api/

# Under -race, on two cores, 2,000 answers written at once take longer:
# the suite holds TestLongPollLoad to a looser bound (api/race_test.go),
# and this target runs it alone without the detector, to the strict one.
# The race detector also caps a binary's live goroutines (8,128): the suite
# holds 4,000 waits for job ends on one client (queue/race_test.go), this
# target 10,000.
test-load: deps ## 2,000 concurrent HTTP long polls on one server, and 10,000 waits for job ends on one client, without the race detector (about 50 s with the builds)
	$(GO) test -count=1 -timeout 2m -run '^TestLongPollLoad$$' ./api/
	$(GO) test -count=1 -timeout 2m -run '^TestWaitEndedHoldsTenThousandWaiters$$' ./queue/

test-race: test ## same as test (the suite always runs with -race)

test-short: deps ## quick run: no race detector, no cluster suite
	$(GO) test -short -count=1 $(PKGS)

bench: deps ## benchmarks: end-to-end throughput and scheduled-job lateness (true clocks, and the promoter 30 s ahead) on real Redis
	$(GO) test -run '^$$' -bench . -skip Bounded -benchtime 1x -count 1 -timeout 10m ./queue/ ./delayed/

bench-instr: deps ## the instructions Redis runs in one script call of each step of a job's path, under valgrind's callgrind: repeatable on a busy machine (valgrind installed from Debian's packages as root when missing; about 30 s a run, BENCH_COUNT=2 runs it twice)
	@scripts/ensure-deps.sh --valgrind
	$(GO) test -run '^$$' -bench CallInstructions -benchtime 1x -count $(BENCH_COUNT) -timeout 10m ./queue/

BENCH_COUNT ?= 1
bench-bounded: deps ## longest Redis command with 2M pending jobs (fails when over 1 ms in each of 3 rounds), memory per job and per claim (about 30 s); BENCH_COUNT=2 runs each twice
	$(GO) test -run '^$$' -bench Bounded -benchtime 1x -count $(BENCH_COUNT) -timeout 15m -v ./queue/

bench-http: deps ## the HTTP API: enqueue requests/s single and in batches of 100 and 1000, a worker's claim and complete one job a call, and scheduled-job lateness through the long-poll claim
	$(GO) test -run '^$$' -bench HTTPEnqueue -benchtime 5s -count 1 -timeout 10m ./api/
	$(GO) test -run '^$$' -bench HTTPWork -benchtime 20000x -count 2 -timeout 10m ./api/
	$(GO) test -run '^$$' -bench HTTPLateness -benchtime 1x -count 2 -timeout 10m ./api/

bench-peer: deps ## chronoq vs asynq side by side on one redis-server (module bench/); BENCH_ARGS="-n 20000 -only e2e,late"
	cd bench && $(GO) run . $(BENCH_ARGS)

# A count, not a duration: go1.26's fuzz coordinator can fail a duration
# run with "context deadline exceeded" when the time runs out while a worker
# is busy (golang/go#75804, fixed in go1.27). Minimizing a new input is
# bounded too, so a run stops by itself.
FUZZTIME ?= 50000x
fuzz: deps ## fuzz the request decoding, each target for FUZZTIME executions (default 50000x, about 10 s each here)
	@for t in FuzzEnqueueRequest:./api/ FuzzBatchRequest:./api/ FuzzRequest:./api/ FuzzAppendString:./api/internal/wire/; do \
	  f=$${t%%:*}; pkg=$${t#*:}; \
	  echo "fuzzing $$f ($$pkg) for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg || exit 1; \
	done

# golangci-lint runs with .golangci.yml at the version pinned in
# tools/go.mod; scripts/golangci-lint.sh installs it into bin/ first when
# needed (the release binary, or a build from source when GitHub is out of
# reach).
lint: generate-check ## gofmt, go vet, golangci-lint (.golangci.yml), and the generated code up to date
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	GO=$(GO) scripts/golangci-lint.sh run $(PKGS)

fmt: ## format the code
	gofmt -w .

# The Go client generated from the OpenAPI document, by the oapi-codegen
# pinned in go.mod's tool directive (go tool oapi-codegen).
GENERATED := client

generate: ## regenerate the generated code: client from api/openapi.json
	$(GO) generate ./$(GENERATED)/

generate-check: generate ## fail when the checked-in generated code differs from what the generator makes
	@git diff --exit-code -- $(GENERATED) || { 	  echo "$(GENERATED) is not what oapi-codegen makes of api/openapi.json: run make generate and commit it"; exit 1; }
	@new=$$(git ls-files --others --exclude-standard -- $(GENERATED)); if [ -n "$$new" ]; then 	  echo "generated files not committed: $$new"; exit 1; fi

# The example workers in other languages (examples/worker-ts,
# examples/worker-py), which TestExampleWorkers in cmd/chronoq runs against
# serve. The TypeScript worker's types are generated from api/openapi.json
# by openapi-typescript and not committed: the test generates them from
# the document as it is and compiles the worker against them. The Python
# worker needs nothing but python3.
EXAMPLE_TS := examples/worker-ts

examples-deps: ## node, npm and python3 for the example workers (installed from Debian's packages as root when missing), and the TypeScript worker's npm packages (npm ci) when its lock file changed
	@scripts/ensure-deps.sh --examples
	@$(MAKE) -s --no-print-directory $(EXAMPLE_TS)/node_modules/.package-lock.json

$(EXAMPLE_TS)/node_modules/.package-lock.json: $(EXAMPLE_TS)/package-lock.json
	cd $(EXAMPLE_TS) && npm ci --no-audit --no-fund

examples: examples-deps ## the example workers ready to run: the TypeScript worker's types generated from api/openapi.json (openapi-typescript), and the worker compiled against them
	cd $(EXAMPLE_TS) && npm run --silent generate && npm run --silent build

# The tools a generated client meets, which TestOpenAPITools in api runs
# on the served document: Redocly's CLI (recommended rules, no error) and
# openapi-typescript with its default settings. Pinned by the lock file.
OPENAPI_TOOLS := api/testdata/openapi-tools

openapi-tools-deps: ## node and npm (installed from Debian's packages as root when missing), and Redocly's CLI and openapi-typescript (npm ci) for TestOpenAPITools when their lock file changed
	@scripts/ensure-deps.sh --openapi-tools
	@$(MAKE) -s --no-print-directory $(OPENAPI_TOOLS)/node_modules/.package-lock.json

$(OPENAPI_TOOLS)/node_modules/.package-lock.json: $(OPENAPI_TOOLS)/package-lock.json
	cd $(OPENAPI_TOOLS) && npm ci --no-audit --no-fund

CHAOS_FLAGS ?=

chaos: deps ## fault-injection battery, full size: every scenario (about 10 min); CHAOS_FLAGS="-scenarios reshard" for one
	$(GO) run ./cmd/chronoq-chaos run -go $(GO) $(CHAOS_FLAGS)

chaos-short: deps ## fault-injection battery, CI form: every scenario scaled down (about 3 min)
	$(GO) run ./cmd/chronoq-chaos run -go $(GO) -short $(CHAOS_FLAGS)
