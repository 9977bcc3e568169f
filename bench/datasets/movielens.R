# MovieLens (dslabs 0.7.4's `movielens`, Debian's r-cran-dslabs: 100,004
# ratings of 9,066 movies by 671 users, GroupLens' ml-latest-small) as a
# CTR-like task: did the user rate the movie 4 or more (52 % did)? The
# ratings in a random order (seed 1); the first 90 % train, the rest eval,
# tab-separated without a header: label, the dense column age (years from
# the movie's release to the rating), then the categorical columns user,
# movie, genres (the whole genre list as one token) and year.
#   Rscript movielens.R DSLABS_DATA_DIR OUT_DIR
# (DSLABS_DATA_DIR: .../site-library/dslabs/data; bench/datasets/prepare.sh
# unpacks the package there.)
args <- commandArgs(trailingOnly = TRUE)
e <- new.env()
lazyLoad(file.path(args[1], "Rdata"), envir = e)
m <- get("movielens", e)
set.seed(1)
m <- m[sample(nrow(m)), ]
rated <- as.integer(format(as.POSIXct(m$timestamp, origin = "1970-01-01", tz = "UTC"), "%Y"))
age <- pmax(0L, rated - ifelse(is.na(m$year), rated, m$year))
out <- data.frame(label = as.integer(m$rating >= 4), age = age, user = m$userId,
                  movie = m$movieId, genres = gsub("[ \t]", "_", as.character(m$genres)),
                  year = ifelse(is.na(m$year), "", m$year))
cut <- floor(nrow(out) * 0.9)
write.table(out[1:cut, ], file.path(args[2], "train.tsv"), sep = "\t", quote = FALSE,
            row.names = FALSE, col.names = FALSE)
write.table(out[(cut + 1):nrow(out), ], file.path(args[2], "eval.tsv"), sep = "\t",
            quote = FALSE, row.names = FALSE, col.names = FALSE)
writeLines(c("{", '  "separator": "tab", "num_columns": 6, "label": 0,',
             '  "dense": [{"column": 1, "transform": "log1p"}],',
             '  "sparse": [2, 3, 4, 5]', "}"), file.path(args[2], "schema.json"))
cat(sprintf("movielens: %d training rows, %d eval rows in %s\n", cut, nrow(out) - cut, args[2]))
