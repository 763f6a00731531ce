package dispatch_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/dispatch"
)

// The Standard Webhooks spec's published vector (libraries/go
// webhook_test.go, TestWebhookSign, of standard-webhooks/standard-webhooks).
const (
	vecSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID      = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS      = 1614265330
	vecPayload = `{"test": 2432232314}`
	vecSig     = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignMatchesStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	sig, err := dispatch.Sign([]string{vecSecret}, vecID, time.Unix(vecTS, 0), []byte(vecPayload))
	require.NoError(t, err)
	require.Equal(t, vecSig, sig)
	// The secret without its prefix signs the same.
	sig, err = dispatch.Sign([]string{vecSecret[len("whsec_"):]}, vecID, time.Unix(vecTS, 0), []byte(vecPayload))
	require.NoError(t, err)
	require.Equal(t, vecSig, sig)
}

func vecHeader(sig string, ts int64) http.Header {
	h := http.Header{}
	h.Set(dispatch.HeaderID, vecID)
	h.Set(dispatch.HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(dispatch.HeaderSignature, sig)
	return h
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(vecTS, 0).Add(time.Minute)
	body := []byte(vecPayload)
	other := dispatch.NewSecret()

	require.NoError(t, dispatch.Verify(vecHeader(vecSig, vecTS), body, now, 0, vecSecret))
	require.NoError(t, dispatch.Verify(vecHeader(vecSig, vecTS), body, now, 0, other, vecSecret), "the second secret of a rotation")
	// Several signatures, as the spec's multi-signature case: one valid is enough.
	multi := "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= " + vecSig
	require.NoError(t, dispatch.Verify(vecHeader(multi, vecTS), body, now, 0, vecSecret))

	require.ErrorIs(t, dispatch.Verify(vecHeader(vecSig, vecTS), body, now, 0, other), dispatch.ErrBadSignature)
	require.ErrorIs(t, dispatch.Verify(vecHeader("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=", vecTS), body, now, 0, vecSecret), dispatch.ErrBadSignature)
	require.ErrorIs(t, dispatch.Verify(vecHeader(vecSig, vecTS), []byte(`{"test": 2432232315}`), now, 0, vecSecret), dispatch.ErrBadSignature)
	require.ErrorIs(t, dispatch.Verify(vecHeader(vecSig, vecTS), body, time.Unix(vecTS, 0).Add(6*time.Minute), 0, vecSecret), dispatch.ErrBadTimestamp)
	require.ErrorIs(t, dispatch.Verify(vecHeader(vecSig, vecTS), body, time.Unix(vecTS, 0).Add(-6*time.Minute), 0, vecSecret), dispatch.ErrBadTimestamp)
	require.NoError(t, dispatch.Verify(vecHeader(vecSig, vecTS), body, time.Unix(vecTS, 0).Add(time.Hour), 2*time.Hour, vecSecret))
	h := vecHeader(vecSig, vecTS)
	h.Del(dispatch.HeaderID)
	require.ErrorIs(t, dispatch.Verify(h, body, now, 0, vecSecret), dispatch.ErrNoSignature)

	// Two secrets sign twice; either verifies alone.
	sig, err := dispatch.Sign([]string{vecSecret, other}, "m1", now, body)
	require.NoError(t, err)
	hh := vecHeader(sig, now.Unix())
	hh.Set(dispatch.HeaderID, "m1")
	require.NoError(t, dispatch.Verify(hh, body, now, 0, other))
	require.NoError(t, dispatch.Verify(hh, body, now, 0, vecSecret))
}
