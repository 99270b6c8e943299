package main

import (
	"github.com/quarantine-dev/quarantine/broker/kafka"
	"github.com/quarantine-dev/quarantine/broker/nats"
	"github.com/quarantine-dev/quarantine/broker/pubsub"
	"github.com/quarantine-dev/quarantine/broker/rabbitmq"
	"github.com/quarantine-dev/quarantine/broker/sqs"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/replay"
)

// The collector kinds. Each entry decodes and validates its broker's keys
// when the configuration is loaded, and returns the openers of its source
// and of its replay publisher.
func init() {
	brokerKinds["rabbitmq"] = func(name string, raw []byte) (brokerOpeners, error) {
		c, err := decodeBroker[rabbitmq.Config](raw)
		if err != nil {
			return brokerOpeners{}, err
		}
		return brokerOpeners{
			source: func(d collectorDeps) (collect.Source, error) { return rabbitmq.NewSource(name, c, d.logger) },
			publisher: func(d collectorDeps) (replay.Publisher, error) {
				return rabbitmq.NewPublisher(c, name, d.logger), nil
			},
		}, nil
	}
	brokerKinds["sqs"] = func(name string, raw []byte) (brokerOpeners, error) {
		c, err := decodeBroker[sqs.Config](raw)
		if err != nil {
			return brokerOpeners{}, err
		}
		return brokerOpeners{
			source: func(d collectorDeps) (collect.Source, error) { return sqs.NewSource(name, c, d.logger) },
			publisher: func(d collectorDeps) (replay.Publisher, error) {
				return sqs.NewPublisher(c, name, d.logger)
			},
		}, nil
	}
	brokerKinds["nats"] = func(name string, raw []byte) (brokerOpeners, error) {
		c, err := decodeBroker[nats.Config](raw)
		if err != nil {
			return brokerOpeners{}, err
		}
		return brokerOpeners{
			source: func(d collectorDeps) (collect.Source, error) {
				s, err := nats.NewSource(name, c, d.logger)
				if err != nil {
					return nil, err
				}
				s.SetAudit(d.audit)
				return s, nil
			},
			publisher: func(d collectorDeps) (replay.Publisher, error) {
				return nats.NewPublisher(c, name, d.logger), nil
			},
		}, nil
	}
	brokerKinds["kafka"] = func(name string, raw []byte) (brokerOpeners, error) {
		c, err := decodeBroker[kafka.Config](raw)
		if err != nil {
			return brokerOpeners{}, err
		}
		return brokerOpeners{
			source: func(d collectorDeps) (collect.Source, error) { return kafka.NewSource(name, c, d.logger) },
			publisher: func(d collectorDeps) (replay.Publisher, error) {
				return kafka.NewPublisher(c, name, d.logger)
			},
		}, nil
	}
	brokerKinds["pubsub"] = func(name string, raw []byte) (brokerOpeners, error) {
		c, err := decodeBroker[pubsub.Config](raw)
		if err != nil {
			return brokerOpeners{}, err
		}
		return brokerOpeners{
			source: func(d collectorDeps) (collect.Source, error) { return pubsub.NewSource(name, c, d.logger) },
			publisher: func(d collectorDeps) (replay.Publisher, error) {
				return pubsub.NewPublisher(c, name, d.logger)
			},
		}, nil
	}
}
