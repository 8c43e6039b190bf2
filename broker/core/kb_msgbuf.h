/*
 * kb_msgbuf: the text Kafka puts beside an error code in a response
 * ("Topic 't' already exists."), written by whichever check refused.
 *
 * Invariants: text is always NUL-terminated and at most 511 bytes; a NULL
 * kb_msgbuf * is accepted everywhere and means "no text wanted".
 *
 * Ownership: the caller owns the buffer (usually on its stack).
 */
#ifndef KB_MSGBUF_H
#define KB_MSGBUF_H

typedef struct kb_msgbuf {
    char text[512];
} kb_msgbuf;

/* printf into msg (NULL is fine); a longer text is cut. */
void kb_msgf(kb_msgbuf *msg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
