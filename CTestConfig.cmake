# CDash settings for the a2sgd dashboard (the dashboard driver script lives in scripts/).
set(CTEST_PROJECT_NAME "a2sgd")
set(CTEST_NIGHTLY_START_TIME "01:00:00 UTC")
set(CTEST_SUBMIT_URL "https://my.cdash.org/submit.php?project=a2sgd")
set(CTEST_DROP_SITE_CDASH TRUE)
