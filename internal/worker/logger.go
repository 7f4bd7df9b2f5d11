package worker

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kafkamender/kafkamender/internal/config"
)

// NewLogger builds the process logger described by the log section of the
// configuration: JSON or console lines on stderr, at the given level. It does
// not sample: a worker logs little, and every line about a change matters.
func NewLogger(c config.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", c.Level, err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.Sampling = nil
	zc.EncoderConfig.TimeKey = "time"
	zc.EncoderConfig.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	zc.EncoderConfig.EncodeDuration = zapcore.StringDurationEncoder
	switch c.Format {
	case "json":
		zc.Encoding = "json"
	case "console":
		zc.Encoding = "console"
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	default:
		return nil, fmt.Errorf("log format %q: want json or console", c.Format)
	}
	logger, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return logger, nil
}
