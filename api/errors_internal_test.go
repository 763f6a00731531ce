package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/queue"
)

// TestStoreErrorsMapToCodes: each error of the store is answered with its
// status, code and field. The mapping is tested here, not over HTTP: the
// routes' own tests meet the errors each route can answer, and hold them
// to the OpenAPI document.
func TestStoreErrorsMapToCodes(t *testing.T) {
	t.Parallel()
	s := &Server{log: slog.New(slog.DiscardHandler)}
	e := echo.New()
	for _, tt := range []struct {
		err    error
		status int
		code   string
		field  string
	}{
		{&queue.FieldError{Index: -1, Field: "payload", Err: queue.ErrPayloadTooLarge}, 413, "payload_too_large", "payload"},
		{&queue.FieldError{Index: 4, Field: "kind", Err: queue.ErrInvalidKind}, 400, "invalid_argument", "jobs[4].kind"},
		{queue.ErrInvalidQueue, 400, "invalid_argument", "queue"},
		{queue.ErrInvalid, 400, "invalid_argument", ""},
		{queue.ErrNotFound, 404, "not_found", ""},
		{queue.ErrLeaseLost, 409, "lease_lost", ""},
		{queue.ErrConflict, 409, "conflict", ""},
		{queue.ErrTooManyQueues, 409, "conflict", ""},
		{queue.ErrPayloadTooLarge, 413, "payload_too_large", ""},
		{queue.ErrUnavailable, 503, "unavailable", ""},
		{context.DeadlineExceeded, 503, "unavailable", ""},
	} {
		rec := httptest.NewRecorder()
		c := e.NewContext(httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/jobs", nil), rec)
		s.handleError(tt.err, c)
		require.Equal(t, tt.status, rec.Code, "%v", tt.err)
		var body errorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		require.Equal(t, tt.code, body.Error.Code, "%v", tt.err)
		require.Equal(t, tt.field, body.Error.Field, "%v", tt.err)
		require.NotEmpty(t, body.Error.Message)
		if tt.status == 503 {
			require.Equal(t, "1", rec.Header().Get("Retry-After"))
		}
	}
}
