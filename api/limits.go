package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/chronoq/chronoq/queue"
)

// limitsJSON is a queue's limits in the API (queue.Limits): 0 is none.
type limitsJSON struct {
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
	MaxInFlight int     `json:"max_in_flight"`
}

func toLimitsJSON(l queue.Limits) limitsJSON {
	return limitsJSON{Rate: l.Rate, Burst: l.Burst, MaxInFlight: l.MaxInFlight}
}

// getLimits: GET /v1/queues/{queue}/limits; zeros when it has none.
func (s *Server) getLimits(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	l, err := s.manage.Limits(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toLimitsJSON(l))
}

// putLimits: PUT /v1/queues/{queue}/limits; sets them (creating the
// queue), answers them with their defaults filled.
func (s *Server) putLimits(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	var req limitsJSON
	if err := s.decode(c, &req, false); err != nil {
		return err
	}
	l, err := s.manage.SetLimits(c.Request().Context(), q, queue.Limits{Rate: req.Rate, Burst: req.Burst, MaxInFlight: req.MaxInFlight})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toLimitsJSON(l))
}

// deleteLimits: DELETE /v1/queues/{queue}/limits; 204, or 404 for a
// queue never used (it makes none).
func (s *Server) deleteLimits(c echo.Context) error {
	q, err := pathQueue(c)
	if err != nil {
		return err
	}
	if err := s.manage.ClearLimits(c.Request().Context(), q); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
