# CDash settings of the a2sgd dashboard. Read by include(CTest) in a configured build tree
# (`make Experimental`, `ctest -D Experimental`) and by the dashboard driver script
# cmake/ctest/dashboard.cmake (`ctest -S`, see the README).
set(CTEST_PROJECT_NAME "a2sgd")
set(CTEST_NIGHTLY_START_TIME "01:00:00 UTC")
set(CTEST_DROP_SITE_CDASH TRUE)

# Where results are submitted: the project keeps no public dashboard, so there is no default. A
# site names its CDash with the cache variable A2SGD_CDASH_SUBMIT_URL (at configure time) or the
# environment variable of that name, e.g. https://my.cdash.org/submit.php?project=a2sgd after
# registering the project there. Without one, results stay in the build tree's Testing/.
if(NOT A2SGD_CDASH_SUBMIT_URL AND DEFINED ENV{A2SGD_CDASH_SUBMIT_URL})
  set(A2SGD_CDASH_SUBMIT_URL "$ENV{A2SGD_CDASH_SUBMIT_URL}")
endif()
if(A2SGD_CDASH_SUBMIT_URL)
  set(CTEST_SUBMIT_URL "${A2SGD_CDASH_SUBMIT_URL}")
endif()
