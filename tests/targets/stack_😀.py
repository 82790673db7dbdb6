"""A file whose name needs 4-byte characters (emoji)."""


def emoji_file(park):
    park("emoji_file")
