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

// runWebhooks is "chronoq webhooks": event webhook subscriptions and their
// dead deliveries.
func runWebhooks(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI("webhooks", env, stdout, stderr)
	var url, timeout string
	var queues, kinds, events, secrets, ids listFlag
	var limit int
	c.fs.StringVar(&url, "endpoint", "", "create, update: the URL the events go to (required)")
	c.fs.StringVar(&timeout, "timeout", "", "create, update: a request's timeout, 1s to 30s (default 10s)")
	c.fs.Var(&queues, "queue", "create, update: only this queue's events (repeat, or comma-separated; default every queue)")
	c.fs.Var(&kinds, "kind", "create, update: only the events of jobs of this kind (repeat; default every kind)")
	c.fs.Var(&events, "event", "create, update: only this event type: job.completed, job.dead, job.canceled, job.retried, cron.fired, workflow.ended (repeat; default every one)")
	c.fs.Var(&secrets, "secret", "create, update: a signing secret, whsec_...; two while rotating (default: one made; update: kept)")
	c.fs.Var(&ids, "id", "retry: only this dead delivery (repeat; default every one)")
	c.fs.IntVar(&limit, "limit", 100, "dead: most deliveries, 1 to 1000")
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
	needID := func() (string, bool) {
		if len(pos) != 2 {
			return "", false
		}
		return pos[1], true
	}
	request := func() client.WebhookRequest {
		r := client.WebhookRequest{Url: url}
		if timeout != "" {
			r.Timeout = &timeout
		}
		if len(queues) > 0 {
			r.Queues = (*[]string)(&queues)
		}
		if len(kinds) > 0 {
			r.Kinds = (*[]string)(&kinds)
		}
		if len(events) > 0 {
			ev := make([]client.WebhookRequestEvents, len(events))
			for i, e := range events {
				ev[i] = client.WebhookRequestEvents(e)
			}
			r.Events = &ev
		}
		if len(secrets) > 0 {
			r.Secrets = (*[]string)(&secrets)
		}
		return r
	}
	one := func(res interface {
		answer
	}, v *client.Webhook, err error) int {
		return show(c, res, err, func(w io.Writer) error {
			s, err := typed(v)
			if err != nil {
				return err
			}
			return printWebhook(w, *s)
		})
	}
	switch pos[0] {
	case "list":
		if len(pos) != 1 {
			return c.usageErr("usage: chronoq webhooks list")
		}
		res, err := c.api.ListWebhooksWithResponse(ctx)
		return show(c, res, err, func(w io.Writer) error {
			v, err := typed(res.JSON200)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tURL\tQUEUES\tKINDS\tEVENTS\tPENDING\tDEAD")
			for _, s := range v.Webhooks {
				events := make([]string, len(s.Events))
				for i, e := range s.Events {
					events[i] = string(e)
				}
				dash := func(l []string) string {
					if len(l) == 0 {
						return "*"
					}
					return strings.Join(l, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", s.Id, s.Url, dash(s.Queues), dash(s.Kinds), dash(events), s.Pending, s.Dead)
			}
			return tw.Flush()
		})
	case "get":
		id, ok := needID()
		if !ok {
			return c.usageErr("usage: chronoq webhooks get ID")
		}
		res, err := c.api.GetWebhookWithResponse(ctx, id)
		if err != nil {
			return show(c, res, err, nil)
		}
		return one(res, res.JSON200, nil)
	case "create":
		if len(pos) != 1 || url == "" {
			return c.usageErr("usage: chronoq webhooks create --endpoint U [--queue Q] [--kind K] [--event E] [--secret S] [--timeout D]")
		}
		res, err := c.api.CreateWebhookWithResponse(ctx, request())
		if err != nil {
			return show(c, res, err, nil)
		}
		return one(res, res.JSON201, nil)
	case "update":
		id, ok := needID()
		if !ok || url == "" {
			return c.usageErr("usage: chronoq webhooks update ID --endpoint U [...]")
		}
		res, err := c.api.UpdateWebhookWithResponse(ctx, id, request())
		if err != nil {
			return show(c, res, err, nil)
		}
		return one(res, res.JSON200, nil)
	case "delete":
		id, ok := needID()
		if !ok {
			return c.usageErr("usage: chronoq webhooks delete ID")
		}
		res, err := c.api.DeleteWebhookWithResponse(ctx, id)
		return show(c, res, err, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "deleted %s\n", id)
			return err
		})
	case "dead":
		id, ok := needID()
		if !ok {
			return c.usageErr("usage: chronoq webhooks dead ID [--limit N]")
		}
		res, err := c.api.ListWebhookDeadWithResponse(ctx, id, &client.ListWebhookDeadParams{Limit: &limit})
		return show(c, res, err, func(w io.Writer) error {
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
	case "retry":
		id, ok := needID()
		if !ok {
			return c.usageErr("usage: chronoq webhooks retry ID [--id D]")
		}
		body := client.DeadRetryRequest{}
		if len(ids) > 0 {
			body.Ids = (*[]string)(&ids)
		}
		res, err := c.api.RetryWebhookDeadWithResponse(ctx, id, body)
		return show(c, res, err, func(w io.Writer) error {
			v, err := typed(res.JSON200)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "retried %d\n", v.Retried)
			return err
		})
	}
	return c.usageErr("unknown subcommand %q: list, get, create, update, delete, dead or retry", pos[0])
}
