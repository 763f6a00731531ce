package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/client"
)

// worker is an HTTP worker loop written against the generated client
// only, as a Go program that speaks HTTP to chronoq would be: it claims
// (long-polling), heartbeats, fails each "flaky" job's first attempt with
// an immediate retry, and completes every other attempt with a result,
// until it has completed want jobs.
func worker(ctx context.Context, c *client.ClientWithResponses, queue string, want int) error {
	done := 0
	for done < want {
		res, err := c.ClaimWithResponse(ctx, queue, client.Claim{Wait: ptr("10s"), Max: ptr(10), Visibility: ptr("30s")})
		if err != nil {
			return err
		}
		if res.JSON200 == nil {
			return fmt.Errorf("claim: %d %s", res.StatusCode(), res.Body)
		}
		for _, j := range res.JSON200.Jobs {
			hb, err := c.HeartbeatWithResponse(ctx, queue, j.Id, client.Heartbeat{Token: j.Token, Extend: ptr("1m")})
			if err != nil {
				return err
			}
			if hb.JSON200 == nil || hb.JSON200.CancelRequested {
				return fmt.Errorf("heartbeat %s: %d %s", j.Id, hb.StatusCode(), hb.Body)
			}
			if j.Kind == "flaky" && j.Attempts == 1 {
				f, err := c.FailWithResponse(ctx, queue, j.Id, client.Fail{Token: j.Token, Error: ptr("flaked"), RetryAfter: ptr("0s")})
				if err != nil {
					return err
				}
				if f.JSON200 == nil || f.JSON200.Status != client.JobStatusPending {
					return fmt.Errorf("fail %s: %d %s", j.Id, f.StatusCode(), f.Body)
				}
				continue
			}
			cr, err := c.CompleteWithResponse(ctx, queue, j.Id, client.Complete{Token: j.Token,
				Result: map[string]any{"by": "worker", "payload": j.Payload}})
			if err != nil {
				return err
			}
			if cr.JSON200 == nil || cr.JSON200.Status != client.JobStatusCompleted {
				return fmt.Errorf("complete %s: %d %s", j.Id, cr.StatusCode(), cr.Body)
			}
			done++
		}
	}
	return nil
}

// TestGeneratedClient: a client generated from the OpenAPI document
// (package client), unchanged, drives a worker loop against a real server on
// a real Redis: enqueue (single and batch), claim with long poll,
// heartbeat, fail into a retry, complete with a result, read the job,
// list, stats; each answer is decoded by the client's typed responses.
func TestGeneratedClient(t *testing.T) {
	t.Parallel()
	const token = "worker-token"
	b := setup(t, withToken(token))
	c, err := client.NewClientWithResponses(b.http.URL, client.WithHTTPClient(b.http.Client()),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	require.NoError(t, err)
	ctx := b.ctx
	const q = "gen"

	// The worker starts first: its claim waits for jobs.
	werr := make(chan error, 1)
	go func() { werr <- worker(ctx, c, q, 4) }()

	one, err := c.EnqueueWithResponse(ctx, nil, client.NewJob{Queue: ptr(q), Kind: "flaky",
		Payload: map[string]any{"n": 1}, MaxAttempts: ptr(3), IdempotencyKey: ptr("first"),
		Backoff: &client.BackoffRequest{Initial: ptr("1s"), Factor: ptr(2.0), Jitter: ptr(0.0)}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, one.StatusCode(), "%s", one.Body)
	first := one.JSON201
	require.Equal(t, "flaky", first.Kind)
	require.Equal(t, 3, first.MaxAttempts)
	require.Equal(t, 2.0, first.Backoff.Factor)
	require.Equal(t, "/v1/queues/"+q+"/jobs/"+first.Id, one.HTTPResponse.Header.Get("Location"))

	// The same idempotency key: a replay, 200, the same job.
	again, err := c.EnqueueWithResponse(ctx, nil, client.NewJob{Queue: ptr(q), Kind: "flaky", IdempotencyKey: ptr("first")})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, again.StatusCode(), "%s", again.Body)
	require.Equal(t, first.Id, again.JSON200.Id)

	batch, err := c.EnqueueBatchWithResponse(ctx, client.Batch{Jobs: []client.NewJob{
		{Queue: ptr(q), Kind: "resize", Payload: map[string]any{"n": 2}},
		{Queue: ptr(q), Kind: "resize", Payload: []any{3}},
		{Queue: ptr(q), Kind: "mail", Delay: ptr("0s")},
	}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, batch.StatusCode(), "%s", batch.Body)
	require.Len(t, batch.JSON201.Jobs, 3)

	select {
	case err := <-werr:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not finish")
	}

	got, err := c.GetJobWithResponse(ctx, q, first.Id, nil)
	require.NoError(t, err)
	require.NotNil(t, got.JSON200, "%s", got.Body)
	require.Equal(t, client.JobStatusCompleted, got.JSON200.Status)
	require.Equal(t, 2, got.JSON200.Attempts)
	require.Equal(t, "flaked", *got.JSON200.LastError)
	require.NotNil(t, got.JSON200.CompletedAt)
	require.Equal(t, map[string]any{"by": "worker", "payload": map[string]any{"n": 1.0}}, got.JSON200.Result)

	list, err := c.ListJobsWithResponse(ctx, q, &client.ListJobsParams{Status: client.ListJobsParamsStatusCompleted, Limit: ptr(2)})
	require.NoError(t, err)
	require.NotNil(t, list.JSON200, "%s", list.Body)
	require.Len(t, list.JSON200.Jobs, 2)
	require.NotEmpty(t, list.JSON200.NextCursor)
	rest, err := c.ListJobsWithResponse(ctx, q, &client.ListJobsParams{Status: client.ListJobsParamsStatusCompleted,
		Cursor: &list.JSON200.NextCursor})
	require.NoError(t, err)
	require.Len(t, rest.JSON200.Jobs, 2)
	require.Empty(t, rest.JSON200.NextCursor)

	st, err := c.GetQueueWithResponse(ctx, q)
	require.NoError(t, err)
	require.NotNil(t, st.JSON200, "%s", st.Body)
	require.Equal(t, q, st.JSON200.Name)
	require.EqualValues(t, 4, st.JSON200.EnqueuedTotal)
	require.EqualValues(t, 4, st.JSON200.CompletedTotal)
	require.EqualValues(t, 1, st.JSON200.FailedTotal)
	require.EqualValues(t, 1, st.JSON200.RetriedTotal)
	require.Zero(t, st.JSON200.Pending+st.JSON200.Scheduled+st.JSON200.Processing)
	require.Nil(t, st.JSON200.NextRunAt)
	all, err := c.ListQueuesWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, []client.Queue{*st.JSON200}, all.JSON200.Queues)

	// Errors decode too: the typed error body of a 404 and of a 400.
	missing, err := c.GetJobWithResponse(ctx, q, "nosuch", nil)
	require.NoError(t, err)
	require.Equal(t, client.ErrorErrorCodeNotFound, missing.JSON404.Error.Code)
	bad, err := c.EnqueueWithResponse(ctx, nil, client.NewJob{Queue: ptr(""), Kind: "k"})
	require.NoError(t, err)
	require.Equal(t, client.ErrorErrorCodeInvalidArgument, bad.JSON400.Error.Code)
	require.Equal(t, "queue", *bad.JSON400.Error.Field)
}
