"""The levers agents pull: moves, their directions, the GPU frameworks' moves and the embedded
layout space."""
