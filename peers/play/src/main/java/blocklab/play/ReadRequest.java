package blocklab.play;

/** The message every actor of the peer gets: read Content node {@code id}. */
record ReadRequest(long id) {}
