"""Small data the generator draws on, written for this project (no public data set)."""
from __future__ import annotations

NAMES = ("Ava", "Ben", "Cora", "Dan", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jade", "Kai", "Lena", "Milo", "Nora",
         "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tess", "Uma", "Vic", "Wren", "Yara", "Zeke")

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # a common (non-leap) year

# things to count, buy or carry: (singular, plural)
OBJECTS = (("apple", "apples"), ("pencil", "pencils"), ("book", "books"), ("marble", "marbles"),
           ("cookie", "cookies"), ("sticker", "stickers"), ("egg", "eggs"), ("card", "cards"),
           ("shell", "shells"), ("stamp", "stamps"), ("balloon", "balloons"), ("candle", "candles"))

# shop items with a price in whole dollars, for lookups in a table shown in the prompt
SHOP = ("lamp", "kettle", "scarf", "umbrella", "blanket", "mug", "notebook", "backpack", "candle", "clock",
        "teapot", "pillow", "basket", "mirror", "wallet", "towel")

ANIMAL_LEGS = {"spider": 8, "dog": 4, "cat": 4, "chicken": 2, "duck": 2, "ant": 6, "beetle": 6, "horse": 4,
               "cow": 4, "goose": 2, "crab": 10, "octopus": 8, "sheep": 4, "bee": 6}

OPPOSITES = {"hot": "cold", "up": "down", "big": "small", "fast": "slow", "open": "closed", "early": "late",
             "light": "dark", "full": "empty", "wet": "dry", "hard": "soft", "old": "new", "loud": "quiet",
             "high": "low", "thick": "thin", "heavy": "light", "rich": "poor", "first": "last", "win": "lose"}

# common English words for the string tasks, 3 to 9 letters
WORDS = ("cat", "dog", "sun", "map", "cup", "pen", "box", "hat", "bird", "fish", "tree", "lamp", "door", "milk",
         "rain", "star", "moon", "road", "ship", "frog", "apple", "bread", "chair", "cloud", "grape", "horse",
         "lemon", "music", "ocean", "paper", "plant", "river", "stone", "table", "tiger", "water", "window",
         "garden", "pencil", "rocket", "silver", "winter", "yellow", "basket", "bottle", "candle", "castle",
         "dragon", "forest", "guitar", "island", "jacket", "kitten", "ladder", "marble", "orange", "planet",
         "rabbit", "summer", "turtle", "village", "blanket", "chicken", "diamond", "library", "monster",
         "pumpkin", "rainbow", "sandwich", "elephant", "mountain", "notebook", "umbrella", "dinosaur",
         "building", "computer", "strawberry", "butterfly", "chocolate", "telephone", "adventure", "banana",
         "bubble", "coffee", "letter", "mirror", "pepper", "puzzle", "balloon", "cabbage", "giraffe", "kettle")

# unit conversions: (from unit, to unit, factor) with to = from * factor
UNITS = (("meters", "centimeters", 100), ("kilometers", "meters", 1000), ("hours", "minutes", 60),
         ("minutes", "seconds", 60), ("kilograms", "grams", 1000), ("liters", "milliliters", 1000),
         ("feet", "inches", 12), ("yards", "feet", 3), ("days", "hours", 24), ("weeks", "days", 7),
         ("dozens", "items", 12), ("centimeters", "millimeters", 10))

_IRREGULAR = {"sheep": "sheep", "goose": "geese", "octopus": "octopuses", "scarf": "scarves", "mouse": "mice"}


def plural(word: str) -> str:
    return _IRREGULAR.get(word, word + "s")
