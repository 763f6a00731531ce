package queue

import (
	"fmt"

	"github.com/chronoq/chronoq/delayed"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"
)

// inside is a Client seen from chronoq's own packages: the methods of
// plumbing.Client, which are no user's business and so not Client's.
type inside Client

func init() {
	plumbing.Register(func(c any) plumbing.Client {
		qc, ok := c.(*Client)
		if !ok {
			// A programming error of chronoq's own packages, never a
			// user's input: plumbing.Of is internal.
			panic(fmt.Sprintf("plumbing.Of: want a *queue.Client, got %T", c))
		}
		return (*inside)(qc)
	})
}

// Engine answers the client's engine.
func (in *inside) Engine() *store.Store { return in.eng }

var (
	_ plumbing.Client = (*inside)(nil)
	_ delayed.Source  = (*inside)(nil) // Client.Source
)

// asNewJob reads the job that plumbing passes as any.
func asNewJob(nj any) (NewJob, error) {
	j, ok := nj.(NewJob)
	if !ok {
		return NewJob{}, fmt.Errorf("%w: a node's job is a queue.NewJob, got %T", ErrInvalid, nj)
	}
	return j, nil
}
