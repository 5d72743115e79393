# TensorFlow binding tests (included from test/python/CMakeLists.txt once Python3 is found and
# HVDS_REQUIRE_PYTHON_TESTS is defined, before the torch entries). They need
# tensorflow, pytest and cloudpickle in that Python; with HVDS_REQUIRE_PYTHON_TESTS a missing
# piece fails the configure, otherwise the tests are left out with a warning.
set(hvds_tf_why "")
if(NOT Python3_Interpreter_FOUND OR NOT TARGET hvdsparse_cli OR NOT TARGET hvdsparse_lib)
  set(hvds_tf_why "no Python 3 interpreter or no launcher/library")
else()
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import tensorflow, keras, pytest, cloudpickle"
                  RESULT_VARIABLE hvds_tf_missing OUTPUT_QUIET ERROR_QUIET)
  if(hvds_tf_missing)
    set(hvds_tf_why "${Python3_EXECUTABLE} cannot import tensorflow, keras, pytest or cloudpickle (pip install tensorflow-cpu==2.20.0)")
  endif()
endif()
if(hvds_tf_why)
  if(HVDS_REQUIRE_PYTHON_TESTS)
    message(FATAL_ERROR "tensorflow tests cannot run: ${hvds_tf_why}")
  endif()
  message(WARNING "tensorflow tests left out: ${hvds_tf_why}")
else()
  get_filename_component(hvds_tf_root ${CMAKE_CURRENT_LIST_DIR}/../.. ABSOLUTE)
  set(hvds_tf_pythonpath
      "${hvds_tf_root}/frameworks/common:${hvds_tf_root}/frameworks/pytorch:${hvds_tf_root}/frameworks/tensorflow")
  foreach(np 2 3)
    add_test(NAME python_tf_np${np}
             COMMAND $<TARGET_FILE:hvdsparse_cli> run -np ${np} ${Python3_EXECUTABLE} -m pytest -x
                     -q -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR}/tensorflow
             WORKING_DIRECTORY ${hvds_tf_root})
    set_tests_properties(python_tf_np${np} PROPERTIES TIMEOUT 300
      ENVIRONMENT "PYTHONPATH=${hvds_tf_pythonpath};HVDSPARSE_LIBRARY=$<TARGET_FILE:hvdsparse_lib>")
  endforeach()
endif()
