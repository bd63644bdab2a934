package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/webhooks"
)

// The "webhooks" key, the same in both config files (docs/long-running.md, Webhooks):
// the endpoints that get signed deliveries of task events
// (bridge/webhooks).

// webhookConfig is one entry of "webhooks".
type webhookConfig struct {
	URL string `json:"url"`
	// SecretEnv names the variable holding the endpoint's secrets
	// (whsec_…, several separated by spaces during a rotation).
	SecretEnv     string              `json:"secret_env"`
	Events        *[]string           `json:"events"`
	AllowNetworks []string            `json:"allow_networks"`
	Timeout       Duration            `json:"timeout"`
	Retry         *webhookRetryConfig `json:"retry"`
}

// webhookRetryConfig is an endpoint's "retry" schedule.
type webhookRetryConfig struct {
	For         Duration `json:"for"`
	First       Duration `json:"first"`
	MaxInterval Duration `json:"max_interval"`
	MaxAttempts int      `json:"max_attempts"`
}

// webhookCloseTimeout bounds the delivery of what is queued at shutdown.
const webhookCloseTimeout = 10 * time.Second

// webhookEndpoints reads "webhooks" of file, every secret read from the
// environment; problems go to p.
func (m *Main) webhookEndpoints(p *problems, file string, list *[]webhookConfig) []webhooks.Endpoint {
	if list == nil {
		return nil
	}
	var out []webhooks.Endpoint
	for i, c := range *list {
		key := fmt.Sprintf("webhooks[%d]", i)
		before := len(p.list)
		e := webhooks.Endpoint{URL: c.URL, Timeout: time.Duration(c.Timeout)}
		if c.URL == "" {
			p.add(file, key+".url", "is missing: the receiver's URL, such as \"https://hooks.example.com/mcpotc\"")
		} else if err := webhooks.CheckURL(c.URL); err != nil {
			p.add(file, key+".url", err.Error())
		}
		if c.SecretEnv == "" {
			p.add(file, key+".secret_env", "is missing: the environment variable that holds the endpoint's secret (whsec_ and base64)")
		} else if strings.HasPrefix(c.SecretEnv, webhooks.SecretPrefix) {
			// A secret written in by mistake: not repeated.
			p.add(file, key+".secret_env", "must name an environment variable, not hold the secret: secrets are never written in the file, only the variable that holds them")
		} else if v := p.env(m.Getenv, file, key+".secret_env", c.SecretEnv); v != "" {
			keys, err := webhooks.ParseSecrets(v)
			if err != nil {
				p.add(file, key+".secret_env", fmt.Sprintf("environment variable %s: %v", c.SecretEnv, err))
			}
			e.Secrets = keys
		}
		if c.Events != nil {
			if len(*c.Events) == 0 {
				p.add(file, key+".events", "lists no event: leave the key out for all of them")
			}
			for j, name := range *c.Events {
				t, err := webhooks.ParseType(name)
				if err != nil {
					p.add(file, fmt.Sprintf("%s.events[%d]", key, j), err.Error())
				}
				e.Events = append(e.Events, t)
			}
		}
		nets, err := networks(c.AllowNetworks)
		if err != nil {
			p.add(file, key+".allow_networks", err.Error())
		}
		e.AllowNetworks = nets
		if r := c.Retry; r != nil {
			if r.MaxAttempts < 0 {
				p.add(file, key+".retry.max_attempts", "must be at least 1")
			}
			e.Retry = webhooks.Retry{For: time.Duration(r.For), First: time.Duration(r.First), MaxInterval: time.Duration(r.MaxInterval), MaxAttempts: r.MaxAttempts}
		}
		if len(p.list) == before {
			out = append(out, e)
		}
	}
	return out
}

// startWebhooks starts the sender of endpoints (none: nil, which sends
// nothing); its stop delivers what is queued within webhookCloseTimeout.
func startWebhooks(ctx context.Context, log zerolog.Logger, mt *metrics.Metrics, endpoints []webhooks.Endpoint) (*webhooks.Sender, func(), error) {
	s, err := webhooks.New(endpoints, &webhooks.Options{Logger: log, Metrics: mt})
	if err != nil || s == nil {
		return nil, func() {}, err
	}
	log.Info().Int("endpoints", len(endpoints)).Msg("webhooks: sending task events")
	return s, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), webhookCloseTimeout)
		defer cancel()
		if err := s.Close(cctx); err != nil {
			log.Warn().Dur("waited", webhookCloseTimeout).Msg("webhooks: messages still queued at shutdown were dropped")
		}
	}, nil
}

// warnWebhooksChanged says that a reload does not apply "webhooks".
func warnWebhooksChanged(log zerolog.Logger, before, after []webhooks.Endpoint) {
	if !reflect.DeepEqual(before, after) {
		log.Warn().Msg("webhooks: the configuration's webhooks changed; the change applies at the next restart")
	}
}
