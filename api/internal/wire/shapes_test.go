package wire

import "encoding/json"

// The shapes of the API's request bodies (package api), as the decode
// tests need them: a payload, nested structs and slices of them, a map,
// raw members.

type enqueueRequest struct {
	Queue              *string         `json:"queue"`
	Kind               string          `json:"kind"`
	Payload            json.RawMessage `json:"payload"`
	RunAt              *string         `json:"run_at"`
	Delay              *string         `json:"delay"`
	MaxAttempts        *int            `json:"max_attempts"`
	Backoff            json.RawMessage `json:"backoff"`
	Visibility         *string         `json:"visibility"`
	IdempotencyKey     *string         `json:"idempotency_key"`
	ResultTTL          *string         `json:"result_ttl"`
	Target             *targetJSON     `json:"target"`
	CallbackURL        *string         `json:"callback_url"`
	FailureCallbackURL *string         `json:"failure_callback_url"`
	Labels             []string        `json:"labels"`
	DependsOn          []jobRefJSON    `json:"depends_on"`
	OnFailure          *string         `json:"on_failure"`
	FlowKey            *string         `json:"flow_key"`
	Debounce           json.RawMessage `json:"debounce"`
}

type jobRefJSON struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
}

type targetJSON struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Timeout *string           `json:"timeout,omitempty"`
}

type pushConfigRequest struct {
	Target      *targetJSON `json:"target"`
	Secrets     []string    `json:"secrets"`
	Concurrency *int        `json:"concurrency"`
	Labels      []string    `json:"labels"`
}

type workflowRequest struct {
	Nodes     []json.RawMessage `json:"nodes"`
	OnFailure *string           `json:"on_failure"`
}

type nodeRequest struct {
	Name      string          `json:"name"`
	DependsOn []string        `json:"depends_on"`
	Job       json.RawMessage `json:"job"`
}

type claimRequest struct {
	Wait       *string  `json:"wait"`
	Max        *int     `json:"max"`
	Visibility *string  `json:"visibility"`
	WorkerID   *string  `json:"worker_id"`
	Labels     []string `json:"labels"`
}

type backoffRequest struct {
	Initial *string  `json:"initial"`
	Factor  *float64 `json:"factor"`
	Max     *string  `json:"max"`
	Jitter  *float64 `json:"jitter"`
}
