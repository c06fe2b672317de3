package kv

import "github.com/stabilizer/stabilizer/stabilizer"

func streamOf(w WriteResult) stabilizer.StreamID {
	return stabilizer.StreamID{Origin: w.Origin, Name: Stream}
}
