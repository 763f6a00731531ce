package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/chronoq/chronoq/client"
)

// listFlag is a flag given any number of times, or once with values
// separated by commas.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

func printWebhook(w io.Writer, s client.Webhook) error {
	all := func(l []string) string {
		if len(l) == 0 {
			return "every one"
		}
		return strings.Join(l, ", ")
	}
	events := make([]string, len(s.Events))
	for i, e := range s.Events {
		events[i] = string(e)
	}
	_, err := fmt.Fprintf(w, "id:       %s\nurl:      %s\ntimeout:  %s\nqueues:   %s\nkinds:    %s\nevents:   %s\nsecrets:  %s\ncreated:  %s\npending:  %d\ndead:     %d\n",
		s.Id, s.Url, s.Timeout, all(s.Queues), all(s.Kinds), all(events), strings.Join(s.Secrets, " "), fmtTime(&s.CreatedAt), s.Pending, s.Dead)
	return err
}

// webhooksCmd is "chronoq webhooks": its flags, its arguments, and one
// method a subcommand.
type webhooksCmd struct {
	c                                   *cli
	pos                                 []string
	url, timeout                        string
	queues, kinds, events, secrets, ids listFlag
	limit                               int
}

// runWebhooks is "chronoq webhooks": event webhook subscriptions and their
// dead deliveries.
func runWebhooks(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	h := &webhooksCmd{c: newCLI("webhooks", env, stdout, stderr)}
	c := h.c
	c.fs.StringVar(&h.url, "endpoint", "", "create, update: the URL the events go to (required)")
	c.fs.StringVar(&h.timeout, "timeout", "", "create, update: a request's timeout, 1s to 30s (default 10s)")
	c.fs.Var(&h.queues, "queue", "create, update: only this queue's events (repeat, or comma-separated; default every queue)")
	c.fs.Var(&h.kinds, "kind", "create, update: only the events of jobs of this kind (repeat; default every kind)")
	c.fs.Var(&h.events, "event", "create, update: only this event type: job.completed, job.dead, job.canceled, job.retried, cron.fired, workflow.ended (repeat; default every one)")
	c.fs.Var(&h.secrets, "secret", "create, update: a signing secret, whsec_...; two while rotating (default: one made; update: kept)")
	c.fs.Var(&h.ids, "id", "retry: only this dead delivery (repeat; default every one)")
	c.fs.IntVar(&h.limit, "limit", 100, "dead: most deliveries, 1 to 1000")
	c.synopsis(
		"chronoq webhooks list                                  the subscriptions",
		"chronoq webhooks get ID                                one subscription, with its secrets",
		"chronoq webhooks create --endpoint U [--queue Q] [--kind K] [--event E] [--secret S] [--timeout D]",
		"chronoq webhooks update ID --endpoint U [...]          replace its url and filters (secrets left out are kept)",
		"chronoq webhooks delete ID                             delete it and its deliveries",
		"chronoq webhooks dead ID [--limit N]                   its dead deliveries, newest first",
		"chronoq webhooks retry ID [--id D]                     send dead deliveries again")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return c.usageErr("usage: chronoq webhooks list|get|create|update|delete|dead|retry")
	}
	h.pos = pos
	sub := map[string]func(context.Context) int{"list": h.list, "get": h.get, "create": h.create, "update": h.update,
		"delete": h.delete, "dead": h.dead, "retry": h.retry}
	if run, ok := sub[pos[0]]; ok {
		return run(ctx)
	}
	return c.usageErr("unknown subcommand %q: list, get, create, update, delete, dead or retry", pos[0])
}

// id is the subscription's id, the one argument after the subcommand.
func (h *webhooksCmd) id() (string, bool) {
	if len(h.pos) != 2 {
		return "", false
	}
	return h.pos[1], true
}

// request is the subscription the flags describe.
func (h *webhooksCmd) request() client.WebhookRequest {
	r := client.WebhookRequest{Url: h.url}
	if h.timeout != "" {
		r.Timeout = &h.timeout
	}
	if len(h.queues) > 0 {
		r.Queues = (*[]string)(&h.queues)
	}
	if len(h.kinds) > 0 {
		r.Kinds = (*[]string)(&h.kinds)
	}
	if len(h.events) > 0 {
		ev := make([]client.WebhookRequestEvents, len(h.events))
		for i, e := range h.events {
			ev[i] = client.WebhookRequestEvents(e)
		}
		r.Events = &ev
	}
	if len(h.secrets) > 0 {
		r.Secrets = (*[]string)(&h.secrets)
	}
	return r
}

// one shows an answer that is one subscription.
func (h *webhooksCmd) one(res answer, v *client.Webhook, err error) int {
	return show(h.c, res, err, func(w io.Writer) error {
		s, err := typed(v)
		if err != nil {
			return err
		}
		return printWebhook(w, *s)
	})
}

func (h *webhooksCmd) list(ctx context.Context) int {
	if len(h.pos) != 1 {
		return h.c.usageErr("usage: chronoq webhooks list")
	}
	res, err := h.c.api.ListWebhooksWithResponse(ctx)
	return show(h.c, res, err, func(w io.Writer) error {
		v, err := typed(res.JSON200)
		if err != nil {
			return err
		}
		dash := func(l []string) string {
			if len(l) == 0 {
				return "*"
			}
			return strings.Join(l, ",")
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tURL\tQUEUES\tKINDS\tEVENTS\tPENDING\tDEAD")
		for _, s := range v.Webhooks {
			events := make([]string, len(s.Events))
			for i, e := range s.Events {
				events[i] = string(e)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", s.Id, s.Url, dash(s.Queues), dash(s.Kinds), dash(events), s.Pending, s.Dead)
		}
		return tw.Flush()
	})
}

func (h *webhooksCmd) get(ctx context.Context) int {
	id, ok := h.id()
	if !ok {
		return h.c.usageErr("usage: chronoq webhooks get ID")
	}
	res, err := h.c.api.GetWebhookWithResponse(ctx, id)
	if err != nil {
		return show(h.c, res, err, nil)
	}
	return h.one(res, res.JSON200, nil)
}

func (h *webhooksCmd) create(ctx context.Context) int {
	if len(h.pos) != 1 || h.url == "" {
		return h.c.usageErr("usage: chronoq webhooks create --endpoint U [--queue Q] [--kind K] [--event E] [--secret S] [--timeout D]")
	}
	res, err := h.c.api.CreateWebhookWithResponse(ctx, h.request())
	if err != nil {
		return show(h.c, res, err, nil)
	}
	return h.one(res, res.JSON201, nil)
}

func (h *webhooksCmd) update(ctx context.Context) int {
	id, ok := h.id()
	if !ok || h.url == "" {
		return h.c.usageErr("usage: chronoq webhooks update ID --endpoint U [...]")
	}
	res, err := h.c.api.UpdateWebhookWithResponse(ctx, id, h.request())
	if err != nil {
		return show(h.c, res, err, nil)
	}
	return h.one(res, res.JSON200, nil)
}

func (h *webhooksCmd) delete(ctx context.Context) int {
	id, ok := h.id()
	if !ok {
		return h.c.usageErr("usage: chronoq webhooks delete ID")
	}
	res, err := h.c.api.DeleteWebhookWithResponse(ctx, id)
	return show(h.c, res, err, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "deleted %s\n", id)
		return err
	})
}

func (h *webhooksCmd) dead(ctx context.Context) int {
	id, ok := h.id()
	if !ok {
		return h.c.usageErr("usage: chronoq webhooks dead ID [--limit N]")
	}
	res, err := h.c.api.ListWebhookDeadWithResponse(ctx, id, &client.ListWebhookDeadParams{Limit: &h.limit})
	return show(h.c, res, err, func(w io.Writer) error {
		v, err := typed(res.JSON200)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tEVENT\tJOB\tATTEMPTS\tDIED\tERROR")
		for _, d := range v.Deliveries {
			fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%d\t%s\t%s\n", d.Id, d.Event.Type, d.Event.Data.Queue, d.Event.Data.Id, d.Attempts,
				fmtTime(&d.DiedAt), d.Error)
		}
		return tw.Flush()
	})
}

func (h *webhooksCmd) retry(ctx context.Context) int {
	id, ok := h.id()
	if !ok {
		return h.c.usageErr("usage: chronoq webhooks retry ID [--id D]")
	}
	body := client.DeadRetryRequest{}
	if len(h.ids) > 0 {
		body.Ids = (*[]string)(&h.ids)
	}
	res, err := h.c.api.RetryWebhookDeadWithResponse(ctx, id, body)
	return show(h.c, res, err, func(w io.Writer) error {
		v, err := typed(res.JSON200)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "retried %d\n", v.Retried)
		return err
	})
}
