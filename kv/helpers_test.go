package kv

import "github.com/stabilizer/stabilizer/stabilizer/core"

func streamOf(w WriteResult) core.StreamID { return core.StreamID{Origin: w.Origin, Name: Stream} }
