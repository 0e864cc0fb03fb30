package acemq_test

import "github.com/acemq/acemq/codec"

var jsonCodec = codec.JSON
